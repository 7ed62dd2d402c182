import type { Insertable, Selectable } from 'kysely';
import type { Db } from './database.js';
import { constrained } from './errors.js';
import type { SshKeysTable } from './schema.js';

export type SshKeyRow = Selectable<SshKeysTable>;

export class SshKeysRepository {
  constructor(private readonly db: Db) {}

  listForUser(userId: string): Promise<SshKeyRow[]> {
    return this.db
      .selectFrom('ssh_keys')
      .selectAll()
      .where('user_id', '=', userId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
  }

  /** Throws ConstraintViolation: `unique` for a key the user already has, `foreign_key` for no such user. */
  async insert(row: Insertable<SshKeysTable>): Promise<SshKeyRow> {
    await constrained(this.db.insertInto('ssh_keys').values(row).execute());
    return (await this.db.selectFrom('ssh_keys').selectAll().where('id', '=', row.id).executeTakeFirst())!;
  }

  async delete(userId: string, keyId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('ssh_keys')
      .where('id', '=', keyId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }
}
