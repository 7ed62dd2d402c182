import type { Actor, Role } from '@ccp/api';

/** The authenticated caller of an API request. */
export interface Principal {
  id: string;
  username: string;
  role: Role;
}

/** A principal and the token version its credential was issued under: what it opened ends when that moves on. */
export interface CredentialHolder extends Principal {
  tokenVersion: number;
}

export const actorOf = (principal: Principal): Actor => ({
  kind: principal.role,
  id: principal.id,
  username: principal.username,
});
