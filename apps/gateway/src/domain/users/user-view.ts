import type { User } from '@ccp/api';
import { isoOut } from '../../shared/clock.js';
import type { UserListRow } from '../../store/users-repository.js';
import { isExpired } from '../access/account-expiry.js';

export function userView(row: UserListRow, now = new Date().toISOString()): User {
  return {
    id: row.id,
    username: row.username,
    role: row.role,
    status: row.status,
    expired: isExpired(row, now),
    expires_at: isoOut(row.expires_at),
    short_id: row.short_id,
    created_at: isoOut(row.created_at),
    updated_at: isoOut(row.updated_at),
  };
}
