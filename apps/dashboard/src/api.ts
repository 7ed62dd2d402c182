import { createApiClient } from '@ccp/api';
import { session } from './session';

/** Where the app sends someone whose token stopped working; set by the router once it exists. */
let onExpired: () => void = () => {};
export function whenSessionExpires(handler: () => void): void {
  onExpired = handler;
}

export const api = createApiClient({
  token: session.token,
  onUnauthorized: () => {
    // A refusal that arrives after a sign-out (a password change ends every token) has nothing left to end.
    if (!session.get()) return;
    session.signOut();
    onExpired();
  },
});
