import assert from 'node:assert/strict';
import type { Client, ClientChannel } from 'ssh2';
import { FolderSftpServer } from '../../src/sftp-server.js';
import { execCollect, shellQuote } from '../../src/ssh-connection.js';

/**
 * `sshfs -o passive` on the exec channel, our SFTP server on the other end; resolves once mounted.
 * follow_symlinks (the default here) makes sshfs ask the server to resolve links, so the server's refusal is
 * tested; the gateway mounts without it (`followSymlinks: false`), as programs that make links need: with it,
 * the kernel sees a new link show as its target's type and fails the `symlink` call with EIO.
 */
export async function mountWithPassiveSshfs(
  client: Client,
  local: string,
  mountpoint: string,
  { followSymlinks = true }: { followSymlinks?: boolean } = {},
): Promise<ClientChannel> {
  const options = `passive,${followSymlinks ? 'follow_symlinks,' : ''}dir_cache=no`;
  const command = `exec sshfs -f -o ${options} ${shellQuote(`:${local}`)} ${shellQuote(mountpoint)}`;
  // Attached in the callback itself: sshfs's first packet can come in the same read as the channel's
  // confirmation, before a promise's continuation would run, and would be lost.
  const channel = await new Promise<ClientChannel>((resolve, reject) =>
    client.exec(command, (error, opened) => {
      if (error) return reject(error);
      new FolderSftpServer(local).attach(client, opened);
      resolve(opened);
    }),
  );
  const check = `for i in $(seq 1 100); do mountpoint -q ${shellQuote(mountpoint)} && exit 0; sleep 0.1; done; exit 1`;
  assert.equal((await execCollect(client, check)).code, 0, 'sshfs did not mount');
  return channel;
}
