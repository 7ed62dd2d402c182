import type { Insertable, Selectable, Updateable } from 'kysely';
import type { ClusterBus } from '../shared/cluster-messages.js';
import type { Db } from './database.js';
import { constrained } from './errors.js';
import type { UsersTable } from './schema.js';

export type UserRow = Selectable<UsersTable>;
export type NewUserRow = Insertable<UsersTable>;
export const USER_VIEW_COLUMNS = [
  'id',
  'username',
  'role',
  'status',
  'expires_at',
  'short_id',
  'created_at',
  'updated_at',
] as const;
export type UserListRow = Pick<UserRow, (typeof USER_VIEW_COLUMNS)[number]>;
export type UserPatch = Updateable<Omit<UsersTable, 'id' | 'created_at'>>;

type TokenState = Pick<UserRow, 'id' | 'username' | 'role' | 'status' | 'expires_at' | 'token_version'>;

/**
 * The users table. The list and the per-request token checks are served from memory between writes while
 * the cluster bus is live; every write here forgets them and tells the other gateways on the same database
 * (`users.changed`), which forget theirs. A read that raced a write is not kept.
 */
export class UsersRepository {
  private generation = 0;
  private listed: UserListRow[] | null = null;
  private readonly tokenStates = new Map<string, TokenState | undefined>();

  constructor(
    private readonly db: Db,
    private readonly cluster: ClusterBus,
  ) {
    cluster.subscribe('users.changed', () => this.forget());
    cluster.onMissed(() => this.forget());
  }

  private forget(): void {
    this.generation += 1;
    this.listed = null;
    this.tokenStates.clear();
  }

  /** Runs a write, then forgets every cached read and tells the other gateways, whatever the outcome. */
  private async write<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } finally {
      this.forget();
      await this.cluster.publish('users.changed', {}).catch(() => {});
    }
  }

  /** Throws ConstraintViolation (`unique`) for a username, short ID or SSH user already taken. */
  async insert(row: NewUserRow): Promise<UserRow> {
    await this.write(() => constrained(this.db.insertInto('users').values(row).execute()));
    return (await this.findById(row.id))!;
  }

  findById(id: string): Promise<UserRow | undefined> {
    return this.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** What checking a token needs, on every authenticated request. */
  async findTokenState(id: string): Promise<TokenState | undefined> {
    if (this.tokenStates.has(id)) return this.tokenStates.get(id);
    const generation = this.generation;
    const state = await this.db
      .selectFrom('users')
      .select(['id', 'username', 'role', 'status', 'expires_at', 'token_version'])
      .where('id', '=', id)
      .executeTakeFirst();
    // Bounded: token subjects are user ids, and unknown ids (forged tokens never get here) are few.
    if (this.cluster.live && generation === this.generation && this.tokenStates.size < 10_000)
      this.tokenStates.set(id, state);
    return state;
  }

  findByUsername(username: string): Promise<UserRow | undefined> {
    return this.db
      .selectFrom('users')
      .selectAll()
      .where('username_key', '=', username.toLowerCase())
      .executeTakeFirst();
  }

  /** Only the shown columns: the hashes and sealed secrets are the bulk of a row and never listed. */
  async list(): Promise<readonly UserListRow[]> {
    if (this.listed) return this.listed;
    const generation = this.generation;
    const rows = await this.db
      .selectFrom('users')
      .select(USER_VIEW_COLUMNS)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    if (this.cluster.live && generation === this.generation) this.listed = rows;
    return rows;
  }

  async update(id: string, patch: UserPatch): Promise<UserRow | undefined> {
    await this.write(() => this.db.updateTable('users').set(patch).where('id', '=', id).execute());
    return this.findById(id);
  }

  /** Bumps the token version, which ends every token issued before. */
  async revokeTokens(id: string, patch: UserPatch = {}): Promise<void> {
    await this.write(() =>
      this.db
        .updateTable('users')
        .set((eb) => ({ ...patch, token_version: eb('token_version', '+', 1) }))
        .where('id', '=', id)
        .execute(),
    );
  }

  async delete(id: string): Promise<boolean> {
    const result = await this.write(() =>
      this.db.deleteFrom('users').where('id', '=', id).executeTakeFirst(),
    );
    return Number(result.numDeletedRows) > 0;
  }

  async countActiveAdmins(now: string): Promise<number> {
    const row = await this.db
      .selectFrom('users')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('role', '=', 'admin')
      .where('status', '=', 'active')
      .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Users whose expiry has passed and whose expiry effects have not been applied yet. */
  /** Marks a user's expiry handled; false when another gateway did it first (each expiry is handled once). */
  async claimExpiry(id: string, now: string): Promise<boolean> {
    const result = await this.write(() =>
      this.db
        .updateTable('users')
        .set({ expiry_handled_at: now })
        .where('id', '=', id)
        .where('expiry_handled_at', 'is', null)
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows) > 0;
  }

  listNewlyExpired(now: string): Promise<UserRow[]> {
    return this.db
      .selectFrom('users')
      .selectAll()
      .where('expires_at', '<=', now)
      .where('expiry_handled_at', 'is', null)
      .execute();
  }
}
