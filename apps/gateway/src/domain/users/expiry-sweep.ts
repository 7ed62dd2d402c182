import type { EventBus } from '../../events/event-bus.js';
import { systemActor } from '../../events/event-bus.js';
import { nowIso } from '../../shared/clock.js';
import type { UsersRepository } from '../../store/users-repository.js';
import type { AccessRevocation } from '../access/access-revocation.js';

/** Applies the effects of a passed `expires_at` once: sessions closed, hosts stopped, `user.expired` logged.
 * Access itself is refused from the exact moment of expiry by the checks on every request. */
export async function sweepExpiredUsers(
  users: UsersRepository,
  revocation: AccessRevocation,
  bus: EventBus,
): Promise<number> {
  const now = nowIso();
  const expired = await users.listNewlyExpired(now);
  let handled = 0;
  for (const user of expired) {
    // Several gateways sweep the same database: the one that marks it handles it.
    if (!(await users.claimExpiry(user.id, now))) continue;
    handled++;
    await revocation.revoke(user.id, 'expired');
    await bus.emit({
      type: 'user.expired',
      message: `user ${user.username} expired`,
      actor: systemActor,
      userId: user.id,
      data: { username: user.username, expires_at: user.expires_at },
    });
  }
  return handled;
}
