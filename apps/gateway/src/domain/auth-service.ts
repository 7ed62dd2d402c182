import type { LoginResponse } from '@ccp/api';
import { createSigner, createVerifier, TokenError } from 'fast-jwt';
import type { EventBus } from '../events/event-bus.js';
import type { UserRow, UsersRepository } from '../store/users-repository.js';
import type { Access } from './access.js';
import { isoOut } from './clock.js';
import { errors } from './errors.js';
import type { Principal } from './principal.js';

const ISSUER = 'cloud-cli-proxy';

export interface AuthOptions {
  jwtSecret: string;
  tokenTtlSeconds: number;
}

export const isExpired = (user: Pick<UserRow, 'expires_at'>, now = new Date().toISOString()): boolean =>
  user.expires_at !== null && user.expires_at <= now;

/** Logins and tokens; the password check itself is `Access`'s. */
export class AuthService {
  private readonly sign: (payload: Record<string, unknown>) => string;
  private readonly verify: (token: string) => Record<string, unknown>;

  constructor(
    private readonly users: UsersRepository,
    private readonly access: Access,
    private readonly bus: EventBus,
    private readonly options: AuthOptions,
  ) {
    // fast-jwt verifies HS256 synchronously with node:crypto (jose's WebCrypto HMAC is an asynchronous
    // thread-pool job on every request) and keeps recently verified tokens, honouring their expiry.
    const key = Buffer.from(options.jwtSecret, 'utf8');
    this.sign = createSigner({
      key,
      algorithm: 'HS256',
      iss: ISSUER,
      expiresIn: options.tokenTtlSeconds * 1000,
    });
    this.verify = createVerifier({
      key,
      algorithms: ['HS256'],
      allowedIss: ISSUER,
      requiredClaims: ['iss', 'sub', 'iat', 'exp'],
      cache: 1000,
    });
  }

  async login(username: string, password: string, clientAddress: string): Promise<LoginResponse> {
    const user = await this.access.verify({ kind: 'password', username, password }, 'login', clientAddress);
    const issuedAt = Math.floor(Date.now() / 1000);
    const expiresAt = issuedAt + this.options.tokenTtlSeconds;
    const token = this.sign({ sub: user.id, role: user.role, ver: user.token_version, iat: issuedAt });
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
      const payload = this.verify(token);
      subject = String(payload.sub ?? '');
      version = payload.ver;
      role = payload.role;
    } catch (error) {
      if (error instanceof TokenError && error.code === TokenError.codes.expired)
        throw errors.unauthorized('The token has expired');
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
