import type { Client } from 'ssh2';

/** Runs `command` on a ready ssh2 client, then ends the client; what the command printed on stdout. */
export function execAndEnd(client: Client, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    client.exec(command, (error, stream) => {
      if (error) return reject(error);
      let out = '';
      stream.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      stream.on('close', () => {
        client.end();
        resolve(out);
      });
    });
  });
}
