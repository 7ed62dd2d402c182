// ssh2 does not declare its internal SFTP module; only the class that ssh2-internals.ts uses is described.
declare module 'ssh2/lib/protocol/SFTP.js' {
  import type { Client, SFTPWrapper } from 'ssh2';
  export const SFTP: new (
    client: Client,
    chanInfo: { type: string; incoming: { id: number }; outgoing: { id: number } },
    cfg: { server: boolean },
  ) => SFTPWrapper;
}
