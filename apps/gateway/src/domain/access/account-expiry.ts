import type { UserRow } from '../../store/users-repository.js';

/** An account is expired from its `expires_at` on; logins, tokens, sessions and the views all ask this. */
export const isExpired = (user: Pick<UserRow, 'expires_at'>, now = new Date().toISOString()): boolean =>
  user.expires_at !== null && user.expires_at <= now;
