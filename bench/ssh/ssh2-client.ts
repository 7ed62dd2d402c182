// ssh2 clients of the SSH bench: exec round trips over one established connection, and interactive shells
// with a PTY whose keystrokes are echoed back.
import { performance } from 'node:perf_hooks';
import ssh2, { type Client, type ClientChannel, type ConnectConfig } from 'ssh2';

export interface Login {
  host: string;
  port: number;
  username: string;
  privateKey: string;
}

/** Connects and authenticates; `cipher` is what ssh2 agreed on (server to client). */
export function connect(login: Login, timeoutMs = 30_000): Promise<{ client: Client; cipher: string }> {
  const client = new ssh2.Client();
  let cipher = 'unknown';
  const config: ConnectConfig = {
    ...login,
    readyTimeout: timeoutMs,
    hostVerifier: () => true,
    debug: (line: string) => {
      const match = /^Handshake: S->C cipher: (\S+)/.exec(line);
      if (match) cipher = match[1]!;
    },
  };
  return new Promise((resolve, reject) => {
    // The gateway says why it refuses a login in a banner: that is the reason the bench counts.
    let banner = '';
    client.on('banner', (message: string) => {
      banner += message.trim();
    });
    const refused = (error: Error) => reject(banner ? new Error(banner) : error);
    // A server that closes the connection before the login (the gateway refusing one) may say nothing else.
    const closedEarly = () => refused(new Error('the connection closed before the login'));
    client.once('close', closedEarly);
    client.once('ready', () => {
      client.off('error', refused);
      client.off('close', closedEarly);
      // ssh2 leaves Nagle's algorithm on; the bench's own small writes must not wait for delayed ACKs.
      client.setNoDelay(true);
      // Errors after the login end the connection; the bench notices through the failing channel.
      client.on('error', () => {});
      resolve({ client, cipher });
    });
    client.once('error', refused);
    client.connect(config);
  });
}

/** One `exec true` on an established connection: milliseconds from the request until the channel closed. */
export function execTrue(client: Client): Promise<number> {
  const began = performance.now();
  return new Promise((resolve, reject) => {
    client.exec('true', (error, channel) => {
      if (error) return reject(error);
      let code: number | null = null;
      channel.on('exit', (exitCode: number | null) => {
        code = exitCode;
      });
      channel.on('close', () => {
        if (code === 0) resolve(performance.now() - began);
        else reject(new Error(`exec true ended with ${code}`));
      });
      channel.resume();
      channel.stderr.resume();
    });
  });
}

export interface Shell {
  client: Client;
  channel: ClientChannel;
  /** Milliseconds from the TCP connect until the shell's first output (its prompt). */
  openMs: number;
  /** Sends one keystroke and resolves with the milliseconds until the PTY echoed it; rejects once dropped. */
  keystroke(key: string): Promise<number>;
  /** True once the connection or the shell ended without the bench closing it. */
  dropped(): boolean;
  close(): void;
}

/** An interactive login shell with a PTY; resolves once it has printed something. Whatever happens to the
 * connection afterwards is recorded (`dropped`), never thrown at the caller's event loop. */
export async function openShell(login: Login, timeoutMs = 30_000): Promise<Shell> {
  const began = performance.now();
  const { client } = await connect(login, timeoutMs);
  let closing = false;
  let ended = false;
  client.once('close', () => {
    ended = true;
  });
  try {
    const channel = await new Promise<ClientChannel>((resolve, reject) => {
      client.once('close', () => reject(new Error('the connection closed before the shell opened')));
      client.shell({ term: 'xterm', rows: 24, cols: 80 }, (error, stream) =>
        error ? reject(error) : resolve(stream),
      );
    });
    // A write to a channel the server has closed ends in an error event; the closed promise reports it.
    channel.on('error', () => {});
    channel.once('close', () => {
      ended = true;
    });
    let waiting: ((chunk: string) => void) | null = null;
    let output = '';
    channel.setEncoding('utf8');
    channel.on('data', (chunk: string) => {
      output += chunk;
      waiting?.(output);
    });
    channel.stderr.resume();
    const closed = new Promise<never>((_resolve, reject) => {
      const gone = () => reject(new Error('the shell closed'));
      channel.once('close', gone);
      client.once('close', gone);
    });
    closed.catch(() => {});
    const seen = (test: (text: string) => boolean, waitMs: number) =>
      Promise.race([
        closed,
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(() => {
            waiting = null;
            reject(new Error(`no output within ${waitMs} ms`));
          }, waitMs);
          waiting = (text) => {
            if (!test(text)) return;
            waiting = null;
            clearTimeout(timer);
            resolve();
          };
          waiting(output);
        }),
      ]);
    await seen((text) => text.length > 0, timeoutMs);
    const openMs = performance.now() - began;
    // The prompt may come in pieces (and set the window title); keystrokes are timed once the shell is quiet.
    for (let quietSince = performance.now(), length = output.length; performance.now() - quietSince < 300; ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (output.length !== length) [quietSince, length] = [performance.now(), output.length];
      if (performance.now() - began > openMs + 5000) break;
    }
    return {
      client,
      channel,
      openMs,
      async keystroke(key) {
        if (ended) throw new Error('the shell closed');
        output = '';
        const sent = performance.now();
        channel.write(key);
        await seen((text) => text.includes(key), 10_000);
        return performance.now() - sent;
      },
      dropped: () => ended && !closing,
      close: () => {
        closing = true;
        client.end();
      },
    };
  } catch (error) {
    client.end();
    throw error;
  }
}
