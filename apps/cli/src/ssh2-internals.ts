import type { Client, ClientChannel, SFTPWrapper } from 'ssh2';
// ssh2's SFTP class is not exported; it is the one `Server` uses for the `sftp` subsystem.
import { SFTP } from 'ssh2/lib/protocol/SFTP.js';

interface ChannelInternals {
  incoming: { id: number };
  outgoing: { id: number };
  type: string;
}
interface ClientInternals {
  _chanMgr: { update(id: number, channel: unknown): void };
}

/**
 * Turns an open exec channel into an SFTP *server* on our side: reverse sshfs needs the SFTP server where the
 * SSH client is, which ssh2 offers only for its own server. The channel's incoming data is handed to the
 * SFTP instance from now on (what ssh2's server does when it accepts a subsystem); its stderr to `onStderr`.
 */
export function adoptChannelAsSftpServer(
  client: Client,
  channel: ClientChannel,
  onStderr: (chunk: Buffer) => void = () => {},
): SFTPWrapper {
  const info = channel as unknown as ChannelInternals;
  const sftp = new SFTP(
    client,
    { type: info.type, incoming: info.incoming, outgoing: info.outgoing },
    { server: true },
  );
  (client as unknown as ClientInternals)._chanMgr.update(info.incoming.id, sftp);
  // ssh2 hands the channel's extended data to `stderr.push` of whatever holds the channel; SFTP drops it.
  (sftp as unknown as { stderr: unknown }).stderr = {
    push: (chunk: Buffer) => {
      onStderr(chunk);
      return true;
    },
  };
  return sftp;
}

/**
 * The workspace's SFTP server is OpenSSH's, which takes SSH_FXP_SYMLINK's arguments in the reverse of the
 * draft's order. ssh2 swaps them only when the SSH server announces itself as OpenSSH, and the gateway does
 * not (it relays the subsystem to the workspace's sshd).
 */
export function expectOpenSshSftpServer(sftp: SFTPWrapper): void {
  (sftp as unknown as { _isOpenSSH: boolean })._isOpenSSH = true;
}
