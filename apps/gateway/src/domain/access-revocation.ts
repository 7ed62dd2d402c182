export type RevocationReason = 'disabled' | 'expired' | 'deleted' | 'credentials_changed';

export type RevocationListener = (userId: string, reason: RevocationReason) => Promise<void> | void;

/** Parts that hold live access for a user (SSE streams, SSH and VNC sessions, running hosts) register here,
 * and are told when that access must end. */
export class AccessRevocation {
  private readonly listeners: RevocationListener[] = [];

  register(listener: RevocationListener): void {
    this.listeners.push(listener);
  }

  async revoke(userId: string, reason: RevocationReason): Promise<void> {
    for (const listener of this.listeners) await listener(userId, reason);
  }
}
