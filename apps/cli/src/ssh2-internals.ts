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
 * SFTP instance from now on (what ssh2's server does when it accepts a subsystem).
 */
export function adoptChannelAsSftpServer(client: Client, channel: ClientChannel): SFTPWrapper {
  const info = channel as unknown as ChannelInternals;
  const sftp = new SFTP(
    client,
    { type: info.type, incoming: info.incoming, outgoing: info.outgoing },
    { server: true },
  );
  (client as unknown as ClientInternals)._chanMgr.update(info.incoming.id, sftp);
  return sftp;
}
