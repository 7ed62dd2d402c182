import { spawn } from 'node:child_process';

/**
 * A shell command run in a pseudo-terminal (util-linux `script`), driven like a person at a keyboard: wait
 * for text on the screen, type, wait for the end. Needed wherever the program reads from /dev/tty.
 */
export class PtySession {
  private output = '';
  private readonly waiters = new Set<() => void>();
  readonly exited: Promise<number | null>;

  constructor(command: string, env: Record<string, string | undefined>) {
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: { ...env, TERM: 'xterm' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const collect = (chunk: Buffer) => {
      this.output += chunk.toString('utf8');
      for (const wake of this.waiters) wake();
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    this.exited = new Promise((resolve) => child.on('close', (code) => resolve(code)));
    this.type = (text: string) => {
      child.stdin.write(text);
    };
    this.kill = () => child.kill('SIGKILL');
  }

  readonly type: (text: string) => void;
  readonly kill: () => void;

  get screen(): string {
    return this.output;
  }

  /** Resolves once `pattern` has appeared on the screen; fails with the screen so far after `ms`. */
  async waitFor(pattern: string | RegExp, ms = 30_000): Promise<void> {
    const seen = () =>
      typeof pattern === 'string' ? this.output.includes(pattern) : pattern.test(this.output);
    const deadline = Date.now() + ms;
    while (!seen()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${String(pattern)}; screen:\n${this.output}`);
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(wake, left);
        this.waiters.add(wake);
      });
    }
  }

  /** The exit status, killing the session if it has not ended within `ms`. */
  async exitCode(ms = 60_000): Promise<number | null> {
    const timer = setTimeout(() => this.kill(), ms);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
