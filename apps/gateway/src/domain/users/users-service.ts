import { randomUUID } from 'node:crypto';
import type { Actor, CreatedUser, SshCredentials, User, UserStatus } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { nowIso, toIso } from '../../shared/clock.js';
import { violates } from '../../store/errors.js';
import type { UserPatch, UserRow, UsersRepository } from '../../store/users-repository.js';
import { type Access, refusalError } from '../access/access.js';
import type { AccessRevocation } from '../access/access-revocation.js';
import { isExpired } from '../access/account-expiry.js';
import type { Principal } from '../access/principal.js';
import type { SecretBox } from '../access/secret-box.js';
import { generatePassword, generateShortId, hashPassword } from '../access/secrets.js';
import { DomainError, errors } from '../errors.js';
import { userView } from './user-view.js';

export interface CreateUserInput {
  username: string;
  password: string;
  expires_at?: string | null;
  role?: 'admin' | 'user';
}

/** Accounts: creation, status, expiry, passwords and user-level SSH credentials. */
export class UsersService {
  constructor(
    private readonly users: UsersRepository,
    private readonly box: SecretBox,
    private readonly bus: EventBus,
    private readonly revocation: AccessRevocation,
    private readonly passwords: Pick<Access, 'checkOwnPassword'>,
  ) {}

  async create(input: CreateUserInput, actor: Actor): Promise<CreatedUser> {
    if (await this.users.findByUsername(input.username)) throw usernameTaken();
    const passwordHash = await hashPassword(input.password);
    const sshPass = generatePassword(20);
    const now = nowIso();
    const expiresAt = input.expires_at ? toIso(input.expires_at, 'expires_at') : null;
    let row: UserRow | undefined;
    for (let attempt = 0; !row; attempt++) {
      try {
        row = await this.users.insert({
          id: randomUUID(),
          username: input.username,
          username_key: input.username.toLowerCase(),
          role: input.role ?? 'user',
          status: 'active',
          password_hash: passwordHash,
          token_version: 0,
          expires_at: expiresAt,
          expiry_handled_at: null,
          short_id: generateShortId(),
          ssh_user: input.username,
          ssh_pass_sealed: this.box.seal(sshPass),
          created_at: now,
          updated_at: now,
        });
      } catch (error) {
        if (!violates(error, 'unique')) throw error;
        if (await this.users.findByUsername(input.username)) throw usernameTaken();
        if (attempt >= 5) throw error; // a short ID collision five times in a row is not chance
      }
    }
    await this.bus.emit({
      type: 'user.created',
      message: `user ${row.username} created`,
      actor,
      userId: row.id,
      data: { username: row.username, role: row.role, expires_at: row.expires_at },
    });
    return { ...userView(row), ssh_credentials: { ssh_user: row.ssh_user, ssh_pass: sshPass } };
  }

  /** Creates the first admin from the environment when no account of that name exists yet. */
  async ensureAdmin(username: string, password: string | null): Promise<'created' | 'exists'> {
    const existing = await this.users.findByUsername(username);
    if (existing) return 'exists';
    if (!password) throw new Error('ADMIN_PASSWORD is required to create the first admin account');
    try {
      await this.create({ username, password, role: 'admin' }, { kind: 'system', id: null, username: null });
    } catch (error) {
      // Gateways started together on an empty database: one of them made it.
      if (error instanceof DomainError && error.code === 'username_taken') return 'exists';
      throw error;
    }
    return 'created';
  }

  async list(): Promise<User[]> {
    const now = nowIso();
    return (await this.users.list()).map((row) => userView(row, now));
  }

  async get(id: string): Promise<User> {
    return userView(await this.require(id));
  }

  async setStatus(id: string, status: UserStatus, actor: Actor): Promise<User> {
    const user = await this.require(id);
    if (user.status === status) return userView(user);
    if (status === 'disabled') {
      await this.assertNotLastAdmin(user, 'disable');
      await this.users.revokeTokens(id, { status, updated_at: nowIso() });
      await this.revocation.revoke(id, 'disabled');
    } else {
      await this.users.update(id, { status, updated_at: nowIso() });
    }
    await this.bus.emit({
      type: status === 'disabled' ? 'user.disabled' : 'user.enabled',
      message: `user ${user.username} ${status === 'disabled' ? 'disabled' : 'enabled'}`,
      actor,
      userId: id,
      data: { username: user.username, status },
    });
    return this.get(id);
  }

  async setExpiry(id: string, expiresAt: string | null, actor: Actor): Promise<User> {
    const user = await this.require(id);
    const value = expiresAt === null ? null : toIso(expiresAt, 'expires_at');
    const now = nowIso();
    const expiresNow = value !== null && value <= now;
    if (expiresNow) await this.assertNotLastAdmin(user, 'expire');
    // Moving expiry into the future (or clearing it) re-arms the sweep for the next expiry.
    await this.users.update(id, {
      expires_at: value,
      expiry_handled_at: expiresNow ? user.expiry_handled_at : null,
      updated_at: now,
    });
    await this.bus.emit({
      type: 'user.expiry_changed',
      message: `expiry of ${user.username} ${value ? `set to ${value}` : 'cleared'}`,
      actor,
      userId: id,
      data: { username: user.username, expires_at: value },
    });
    return this.get(id);
  }

  async delete(id: string, actor: Actor): Promise<void> {
    const user = await this.require(id);
    await this.assertNotLastAdmin(user, 'delete');
    await this.revocation.revoke(id, 'deleted');
    await this.users.delete(id);
    await this.bus.emit({
      type: 'user.deleted',
      message: `user ${user.username} deleted`,
      actor,
      userId: id,
      data: { username: user.username },
    });
  }

  async rotatePassword(id: string, actor: Actor): Promise<string> {
    const user = await this.require(id);
    const password = generatePassword(20);
    await this.users.revokeTokens(id, await this.newCredentials(password));
    await this.revocation.revoke(id, 'credentials_changed');
    await this.bus.emit({
      type: 'user.password_rotated',
      message: `password of ${user.username} rotated`,
      actor,
      userId: id,
      data: { username: user.username },
    });
    return password;
  }

  async changeOwnPassword(
    principal: Principal,
    oldPassword: string,
    newPassword: string,
    clientAddress: string,
  ): Promise<void> {
    const user = await this.require(principal.id);
    const refusal = await this.passwords.checkOwnPassword(user, oldPassword, clientAddress);
    if (refusal && refusal.reason !== 'invalid_credentials') throw refusalError(refusal);
    if (refusal) {
      await this.bus.emit({
        type: 'user.password_change_failed',
        level: 'warn',
        message: `${user.username} gave a wrong old password`,
        actor: { kind: user.role, id: user.id, username: user.username },
        userId: user.id,
      });
      throw new DomainError('invalid', 'invalid_old_password', 'The old password is not correct', {
        details: [{ field: 'old_password', message: 'is not correct' }],
      });
    }
    await this.users.revokeTokens(user.id, await this.newCredentials(newPassword));
    await this.revocation.revoke(user.id, 'credentials_changed');
    await this.bus.emit({
      type: 'user.password_changed',
      message: `${user.username} changed their password`,
      actor: { kind: user.role, id: user.id, username: user.username },
      userId: user.id,
    });
  }

  async regenerateSshCredentials(id: string, actor: Actor): Promise<SshCredentials> {
    const user = await this.require(id);
    const sshPass = generatePassword(20);
    await this.users.update(id, { ssh_pass_sealed: this.box.seal(sshPass), updated_at: nowIso() });
    await this.bus.emit({
      type: 'user.ssh_credentials_regenerated',
      message: `SSH credentials of ${user.username} regenerated`,
      actor,
      userId: id,
      data: { username: user.username },
    });
    return { ssh_user: user.ssh_user, ssh_pass: sshPass };
  }

  /** The user-level SSH password, decrypted for the access paths that hand it out. */
  async sshCredentials(id: string): Promise<SshCredentials> {
    const user = await this.require(id);
    return { ssh_user: user.ssh_user, ssh_pass: this.box.open(user.ssh_pass_sealed) };
  }

  /**
   * A new login password also replaces the SSH password: entry auth hands `ssh_pass` to whoever knows the login
   * password, so whoever held the old one must not keep SSH access through it. Registered keys stay (the user
   * manages them, and their list shows each one); tokens and live sessions end with the revocation.
   */
  private async newCredentials(password: string): Promise<UserPatch> {
    return {
      password_hash: await hashPassword(password),
      ssh_pass_sealed: this.box.seal(generatePassword(20)),
      updated_at: nowIso(),
    };
  }

  private async require(id: string): Promise<UserRow> {
    const user = await this.users.findById(id);
    if (!user) throw errors.notFound('User');
    return user;
  }

  private async assertNotLastAdmin(user: UserRow, action: string): Promise<void> {
    if (user.role !== 'admin' || user.status !== 'active' || isExpired(user)) return;
    if ((await this.users.countActiveAdmins(nowIso())) <= 1) {
      throw errors.conflict('last_admin', `Cannot ${action} the last active admin`);
    }
  }
}

function usernameTaken(): DomainError {
  return errors.conflict('username_taken', 'A user with this username already exists', {
    details: [{ field: 'username', message: 'is already taken' }],
  });
}
