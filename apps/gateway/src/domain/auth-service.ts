import { createSecretKey, type KeyObject } from 'node:crypto';
import type { Actor, LoginResponse } from '@ccp/api';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { EventBus } from '../events/event-bus.js';
import type { UserRow, UsersRepository } from '../store/users-repository.js';
import { isoOut } from './clock.js';
import { errors } from './errors.js';
import type { Principal } from './principal.js';
import { FailureRateLimiter } from './rate-limiter.js';
import { verifyAgainstNothing, verifyPassword } from './secrets.js';

const ISSUER = 'cloud-cli-proxy';

export interface AuthOptions {
  jwtSecret: string;
  tokenTtlSeconds: number;
}

export const isExpired = (user: Pick<UserRow, 'expires_at'>, now = new Date().toISOString()): boolean =>
  user.expires_at !== null && user.expires_at <= now;

/** Logins, tokens, and the password check shared by every access path. */
export class AuthService {
  private readonly key: KeyObject;

  constructor(
    private readonly users: UsersRepository,
    private readonly limiter: FailureRateLimiter,
    private readonly bus: EventBus,
    private readonly options: AuthOptions,
  ) {
    // Built once: jose would otherwise import the raw secret on every verification.
    this.key = createSecretKey(Buffer.from(options.jwtSecret, 'utf8'));
  }

  /** Verifies a username and password with rate limiting and constant-time answers for unknown users.
   * The account state is only revealed after the password was proven. Every outcome is logged. */
  async verifyCredentials(
    username: string,
    password: string,
    clientAddress: string,
    via: string,
  ): Promise<UserRow> {
    const keys = FailureRateLimiter.keysFor(username, clientAddress);
    const anonymous: Actor = { kind: 'anonymous', id: null, username: null };
    try {
      this.limiter.assertAllowed(keys);
    } catch (error) {
      await this.bus.emit({
        type: `auth.${via}.rate_limited`,
        level: 'warn',
        message: `${via} refused: too many failed attempts`,
        actor: anonymous,
        data: { username, client_address: clientAddress },
      });
      throw error;
    }
    const user = await this.users.findByUsername(username);
    const ok = user
      ? await verifyPassword(password, user.password_hash)
      : await verifyAgainstNothing(password);
    if (!user || !ok) {
      this.limiter.recordFailure(keys);
      await this.bus.emit({
        type: `auth.${via}.failed`,
        level: 'warn',
        message: `${via} failed for ${username}: wrong username or password`,
        actor: anonymous,
        userId: user?.id ?? null,
        data: { username, client_address: clientAddress, reason: 'invalid_credentials' },
      });
      throw errors.invalidCredentials();
    }
    this.limiter.recordSuccess(username);
    const refusal =
      user.status === 'disabled' ? 'account_disabled' : isExpired(user) ? 'account_expired' : null;
    if (refusal) {
      await this.bus.emit({
        type: `auth.${via}.failed`,
        level: 'warn',
        message: `${via} refused for ${user.username}: ${refusal.replace('_', ' ')}`,
        actor: { kind: user.role, id: user.id, username: user.username },
        userId: user.id,
        data: { username: user.username, client_address: clientAddress, reason: refusal },
      });
      throw refusal === 'account_disabled' ? errors.accountDisabled() : errors.accountExpired();
    }
    return user;
  }

  async login(username: string, password: string, clientAddress: string): Promise<LoginResponse> {
    const user = await this.verifyCredentials(username, password, clientAddress, 'login');
    const issuedAt = Math.floor(Date.now() / 1000);
    const expiresAt = issuedAt + this.options.tokenTtlSeconds;
    const token = await new SignJWT({ role: user.role, ver: user.token_version })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject(user.id)
      .setIssuer(ISSUER)
      .setIssuedAt(issuedAt)
      .setExpirationTime(expiresAt)
      .sign(this.key);
    await this.bus.emit({
      type: 'auth.login.succeeded',
      message: `${user.username} logged in`,
      actor: { kind: user.role, id: user.id, username: user.username },
      userId: user.id,
      data: { username: user.username, client_address: clientAddress },
    });
    return {
      token,
      role: user.role,
      expires_at: isoOut(new Date(expiresAt * 1000).toISOString()),
      user: { id: user.id, username: user.username, role: user.role },
    };
  }

  /** Checks a bearer token and the account behind it on every request, so revocation takes effect at once. */
  async authenticate(token: string): Promise<Principal> {
    let subject: string;
    let version: unknown;
    let role: unknown;
    try {
      const { payload } = await jwtVerify(token, this.key, { issuer: ISSUER, algorithms: ['HS256'] });
      subject = String(payload.sub ?? '');
      version = payload.ver;
      role = payload.role;
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw errors.unauthorized('The token has expired');
      throw errors.unauthorized('The token is not valid');
    }
    const user = await this.users.findTokenState(subject);
    if (!user || user.token_version !== version || user.role !== role) {
      throw errors.unauthorized('The token has been revoked');
    }
    if (user.status === 'disabled') throw errors.unauthorized('The account is disabled');
    if (isExpired(user)) throw errors.unauthorized('The account has expired');
    return { id: user.id, username: user.username, role: user.role };
  }
}
