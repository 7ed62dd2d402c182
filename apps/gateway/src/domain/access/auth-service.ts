import { hkdfSync } from 'node:crypto';
import type { LoginResponse } from '@ccp/api';
import { createSigner, createVerifier, TokenError } from 'fast-jwt';
import type { EventBus } from '../../events/event-bus.js';
import { isoOut } from '../../shared/clock.js';
import { errors } from '../errors.js';
import type { Access } from './access.js';
import type { CredentialHolder, Principal } from './principal.js';

const ISSUER = 'cloud-cli-proxy';

export interface AuthOptions {
  jwtSecret: string;
  tokenTtlSeconds: number;
}

/** Logins and tokens; the password check itself is `Access`'s. */
export class AuthService {
  private readonly sign: (payload: Record<string, unknown>) => string;
  private readonly verify: (token: string) => Record<string, unknown>;
  private readonly signPass: (payload: Record<string, unknown>) => string;
  private readonly verifyPass: (pass: string) => Record<string, unknown>;

  constructor(
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
    // Desktop passes have a key of their own (from the same secret, so rotating it ends them too): a pass is
    // never an API token, and an API token never a pass.
    const passKey = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'cloud-cli-proxy desktop pass', 32));
    this.signPass = createSigner({
      key: passKey,
      algorithm: 'HS256',
      iss: ISSUER,
      expiresIn: options.tokenTtlSeconds * 1000,
    });
    this.verifyPass = createVerifier({
      key: passKey,
      algorithms: ['HS256'],
      allowedIss: ISSUER,
      requiredClaims: ['iss', 'sub', 'iat', 'exp', 'host'],
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
    const { id, username, role } = await this.authenticateHolder(token);
    return { id, username, role };
  }

  /** `authenticate`, keeping the token version (live sessions end when it moves on). */
  async authenticateHolder(token: string): Promise<CredentialHolder> {
    const payload = verified(() => this.verify(token), 'token');
    return this.access.holder(String(payload.sub ?? ''), payload.ver, payload.role);
  }

  /** `authenticateHolder`, with when the token expires (epoch ms): a stream it opens ends then. */
  async streamHolder(token: string): Promise<CredentialHolder & { expiresAt: number | null }> {
    const payload = verified(() => this.verify(token), 'token');
    const holder = await this.access.holder(String(payload.sub ?? ''), payload.ver, payload.role);
    return { ...holder, expiresAt: typeof payload.exp === 'number' ? payload.exp * 1000 : null };
  }

  /**
   * The pass of one host's desktop (its cookie): good below that host's desktop path only, for as long as an API
   * token lives, and only while the account stays as it was (like a token).
   */
  desktopPass(holder: CredentialHolder, hostId: string): { pass: string; maxAgeSeconds: number } {
    return {
      pass: this.signPass({ sub: holder.id, role: holder.role, ver: holder.tokenVersion, host: hostId }),
      maxAgeSeconds: this.options.tokenTtlSeconds,
    };
  }

  async authenticateDesktopPass(pass: string, hostId: string): Promise<CredentialHolder> {
    const payload = verified(() => this.verifyPass(pass), 'desktop pass');
    if (payload.host !== hostId) throw errors.unauthorized('The desktop pass is for another desktop');
    return this.access.holder(String(payload.sub ?? ''), payload.ver, payload.role);
  }
}

function verified(check: () => Record<string, unknown>, what: string): Record<string, unknown> {
  try {
    return check();
  } catch (error) {
    if (error instanceof TokenError && error.code === TokenError.codes.expired)
      throw errors.unauthorized(`The ${what} has expired`);
    throw errors.unauthorized(`The ${what} is not valid`);
  }
}
