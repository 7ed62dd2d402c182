import { randomUUID } from 'node:crypto';
import type { Actor, GeneratedSshKey, SshKey } from '@ccp/api';
import type { EventBus } from '../../events/event-bus.js';
import { isoOut, nowIso } from '../../shared/clock.js';
import { violates } from '../../store/errors.js';
import type { SshKeyRow, SshKeysRepository } from '../../store/ssh-keys-repository.js';
import type { UsersRepository } from '../../store/users-repository.js';
import { errors } from '../errors.js';
import { generateEd25519, parsePublicKey } from './ssh-public-key.js';

const keyView = (row: SshKeyRow): SshKey => ({
  id: row.id,
  label: row.label,
  public_key: row.public_key,
  fingerprint: row.fingerprint,
  key_type: row.key_type,
  created_at: isoOut(row.created_at),
});

/** Users' SSH public keys, accepted by the SSH proxy as login secrets. */
export class SshKeysService {
  constructor(
    private readonly keys: SshKeysRepository,
    private readonly users: UsersRepository,
    private readonly bus: EventBus,
  ) {}

  async list(userId: string): Promise<SshKey[]> {
    await this.requireUser(userId);
    return (await this.keys.listForUser(userId)).map(keyView);
  }

  async add(userId: string, publicKey: string, label: string | undefined, actor: Actor): Promise<SshKey> {
    const user = await this.requireUser(userId);
    const parsed = parsePublicKey(publicKey);
    if (typeof parsed === 'string') {
      throw errors.validation([{ field: 'public_key', message: parsed }], `The public key ${parsed}`);
    }
    const row = await this.store(userId, {
      label: label?.trim() || parsed.comment || parsed.keyType,
      line: parsed.line,
      fingerprint: parsed.fingerprint,
      keyType: parsed.keyType,
    });
    await this.emitAdded(user.username, userId, row, actor, false);
    return keyView(row);
  }

  async generate(userId: string, label: string | undefined, actor: Actor): Promise<GeneratedSshKey> {
    const user = await this.requireUser(userId);
    const comment = label?.trim() || `${user.username}@cloud-cli-proxy`;
    const pair = generateEd25519(comment);
    const parsed = parsePublicKey(pair.publicKey);
    if (typeof parsed === 'string') throw new Error(`generated key did not parse: ${parsed}`);
    const row = await this.store(userId, {
      label: comment,
      line: parsed.line,
      fingerprint: parsed.fingerprint,
      keyType: parsed.keyType,
    });
    await this.emitAdded(user.username, userId, row, actor, true);
    return { ...keyView(row), private_key: pair.privateKey };
  }

  async delete(userId: string, keyId: string, actor: Actor): Promise<void> {
    const user = await this.requireUser(userId);
    if (!(await this.keys.delete(userId, keyId))) throw errors.notFound('SSH key');
    await this.bus.emit({
      type: 'user.ssh_key.deleted',
      message: `SSH key removed from ${user.username}`,
      actor,
      userId,
      data: { key_id: keyId },
    });
  }

  private async store(
    userId: string,
    key: { label: string; line: string; fingerprint: string; keyType: string },
  ): Promise<SshKeyRow> {
    try {
      return await this.keys.insert({
        id: randomUUID(),
        user_id: userId,
        label: key.label.slice(0, 100),
        public_key: key.line,
        fingerprint: key.fingerprint,
        key_type: key.keyType,
        created_at: nowIso(),
      });
    } catch (error) {
      if (violates(error, 'unique')) {
        throw errors.conflict('key_exists', 'This key is already registered for the user', {
          details: [{ field: 'public_key', message: 'is already registered' }],
        });
      }
      throw error;
    }
  }

  private async emitAdded(
    username: string,
    userId: string,
    row: SshKeyRow,
    actor: Actor,
    generated: boolean,
  ) {
    await this.bus.emit({
      type: generated ? 'user.ssh_key.generated' : 'user.ssh_key.added',
      message: `SSH key ${row.fingerprint} ${generated ? 'generated for' : 'added to'} ${username}`,
      actor,
      userId,
      data: { key_id: row.id, fingerprint: row.fingerprint, key_type: row.key_type },
    });
  }

  private async requireUser(userId: string) {
    const user = await this.users.findById(userId);
    if (!user) throw errors.notFound('User');
    return user;
  }
}
