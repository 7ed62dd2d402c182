import type { Actor, Role } from '@ccp/api';

/** The authenticated caller of an API request. */
export interface Principal {
  id: string;
  username: string;
  role: Role;
}

export const actorOf = (principal: Principal): Actor => ({
  kind: principal.role,
  id: principal.id,
  username: principal.username,
});
