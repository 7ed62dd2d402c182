import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

/** Node flags that let a child run a TypeScript file of this folder directly (no build step, one PID);
 * tsx is given by absolute URL so the child may run in any working directory. */
export const TS_NODE_FLAGS = ['--conditions=source', '--import', import.meta.resolve('tsx')];

const cleanups: Array<{ task: () => Promise<void>; budgetMs: number }> = [];

/**
 * Registers work that must run when the bench ends, fails, is interrupted or runs out of time; it gets
 * `budgetMs` before the next clean-up starts anyway.
 */
export function onCleanup(task: () => Promise<void>, budgetMs = 8000): void {
  cleanups.push({ task, budgetMs });
}

let cleaning: Promise<void> | null = null;

/** Runs the registered clean-ups newest first, once even when an error and a signal both ask for it;
 * each gets its budget so one hang cannot block the rest. */
export function runCleanups(): Promise<void> {
  cleaning ??= (async () => {
    while (cleanups.length > 0) {
      const { task, budgetMs } = cleanups.pop()!;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, budgetMs);
      });
      await Promise.race([
        task().catch((error: unknown) => console.error('clean-up failed:', error)),
        timeout,
      ]);
      clearTimeout(timer);
    }
  })();
  return cleaning;
}

const running = new Set<ChildProcess>();

/** Runs `main`, and always cleans up: on success, on error, on SIGINT/SIGTERM and after `deadlineMs`. */
export async function runBench(name: string, deadlineMs: number, main: () => Promise<void>): Promise<void> {
  const abort = (reason: string, code: number) => {
    console.error(`${name}: ${reason}; stopping the child processes`);
    runCleanups().finally(() => process.exit(code));
  };
  process.once('SIGINT', () => abort('interrupted', 130));
  process.once('SIGTERM', () => abort('terminated', 143));
  // An error no caller awaited (a socket's error event, a stray rejection) would end the process without the
  // clean-ups, leaving containers behind: it ends the bench the same way as any other failure.
  process.on('uncaughtException', (error) => abort(`failed: ${error.stack ?? error.message}`, 1));
  process.on('unhandledRejection', (reason) =>
    abort(`failed: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}`, 1),
  );
  // Last resort when the process exits some other way: children are killed by PID, synchronously.
  process.once('exit', () => {
    for (const child of running)
      if (child.pid !== undefined && child.exitCode === null) child.kill('SIGKILL');
  });
  const deadline = setTimeout(() => abort(`took longer than ${deadlineMs / 1000} s`, 124), deadlineMs);
  deadline.unref();
  try {
    await main();
  } catch (error) {
    console.error(`${name} failed:`, error instanceof Error ? error.message : error);
    process.exitCode = 1;
  } finally {
    clearTimeout(deadline);
    await runCleanups();
  }
}

export interface Child {
  name: string;
  pid: number;
  /** Resolves with the first stdout line that `match` accepts; rejects when the child exits or time runs out. */
  waitForLine(match: (line: string) => boolean, timeoutMs: number): Promise<string>;
  send(line: string): void;
  /** The last few kilobytes of stderr, for error messages. */
  stderrTail(): string;
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

export interface ChildOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Written to stdin, which is then closed (v2ray reads its config that way, so secrets stay off disk). */
  input?: string;
}

/** Starts `node args…` as a tracked child that is killed by its PID when the bench ends. */
export function startNode(name: string, args: string[], options: ChildOptions = {}): Child {
  return startProcess(name, process.execPath, args, options);
}

/** Starts `command args…` as a tracked child that is killed by its PID when the bench ends. */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: ChildOptions = {},
): Child {
  const proc = spawn(command, args, {
    cwd: options.cwd ?? process.cwd(),
    env: options.env ?? process.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // Without a listener, a command that cannot be found would crash the bench (after the throw below).
  proc.once('error', () => {});
  if (proc.pid === undefined) throw new Error(`${name} did not start (${command} not found?)`);
  const pid = proc.pid;
  running.add(proc);
  if (options.input !== undefined) {
    proc.stdin.on('error', () => {});
    proc.stdin.end(options.input);
  }

  let stderr = '';
  proc.stderr.setEncoding('utf8');
  proc.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => {
    proc.once('exit', (code) => {
      running.delete(proc);
      resolve(code);
    });
  });

  const lines: string[] = [];
  const waiters = new Set<() => void>();
  createInterface({ input: proc.stdout }).on('line', (line) => {
    lines.push(line);
    for (const wake of waiters) wake();
    // Output nobody waits for (log lines) is only kept as far back as a bench could need it.
    if (waiters.size === 0 && lines.length > 1000) lines.splice(0, lines.length - 1000);
  });

  const stop = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const killed = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(killed);
  };
  onCleanup(stop);

  return {
    name,
    pid,
    exited,
    stop,
    stderrTail: () => stderr.trim(),
    send: (line) => {
      proc.stdin.write(`${line}\n`);
    },
    waitForLine(match, timeoutMs) {
      return new Promise((resolve, reject) => {
        let seen = 0;
        const finish = (error: Error | null, line = '') => {
          waiters.delete(check);
          clearTimeout(timer);
          if (error) reject(error);
          else resolve(line);
        };
        const check = () => {
          while (seen < lines.length) {
            const line = lines[seen++]!;
            if (match(line)) {
              lines.splice(0, seen);
              return finish(null, line);
            }
          }
        };
        const timer = setTimeout(
          () => finish(new Error(`${name}: no expected output within ${timeoutMs} ms\n${stderr.trim()}`)),
          timeoutMs,
        );
        waiters.add(check);
        exited.then((code) => finish(new Error(`${name} exited (code ${code})\n${stderr.trim()}`)));
        check();
      });
    },
  };
}

/** Resident set size of a process in MiB, from /proc/<pid>/status (null once it has gone). */
export function rssMiB(pid: number): number | null {
  try {
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : null;
  } catch {
    return null;
  }
}

/** Samples the RSS of `pid` every `intervalMs` until stopped, keeping the peak. */
export function sampleRss(pid: number, intervalMs = 200): { stop(): number | null } {
  let peak: number | null = rssMiB(pid);
  const timer = setInterval(() => {
    const now = rssMiB(pid);
    if (now !== null && (peak === null || now > peak)) peak = now;
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      return peak;
    },
  };
}

/**
 * Kills, by PID, the direct children of this process called `comm` that library code started on its own (the
 * egress tester's v2ray) and so cannot be tracked here. Synchronous, so that it also works in an exit handler.
 */
export function killChildrenNamed(comm: string): void {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (name === comm && ppid === process.pid) {
      try {
        process.kill(Number(entry), 'SIGKILL');
      } catch {
        // It exited in the meantime.
      }
    }
  }
}
