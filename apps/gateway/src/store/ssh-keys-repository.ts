import type { Insertable, Selectable } from 'kysely';
import type { Db } from './database.js';
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

  async insert(row: Insertable<SshKeysTable>): Promise<SshKeyRow> {
    await this.db.insertInto('ssh_keys').values(row).execute();
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
