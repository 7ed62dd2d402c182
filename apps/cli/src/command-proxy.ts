import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Duplex, PassThrough, Transform } from 'node:stream';
import type { Client } from 'ssh2';
import { commandPolicy, type PolicyContext, recordRemotes } from './command-policy.js';
import { isInside } from './folder-paths.js';
import { prepareGit } from './git-environment.js';

/** The workspace side: one wrapper, linked under each proxied name in WRAPPER_DIR (on the session's PATH). */
export const WRAPPER_DIR = '$HOME/.ccp/bin';
const CONF = '$HOME/.ccp/proxy.conf';

/*
 * Protocol over connections the workspace opens to a port forwarded back to this machine (ssh -R style), so
 * everything travels in the SSH connection. Each connection starts with `ccp1 <token> <id> <kind>`:
 *   run <argc> <stdin 0|1>, then NUL-terminated cwd, name and argc arguments; answered `EXIT <code>` at the end
 *   out / err: this side writes the command's stdout / stderr, then ends
 *   in: the wrapper's stdin, until it ends
 */
const WRAPPER = String.raw`#!/bin/bash
# Written by the ccp CLI: runs this command on the user's machine, through the ccp connection, when called
# under the folder ccp mounted; anywhere else the workspace's own command runs.
name=$(basename "$0")
bindir=$(dirname "$0")
own() {
  local IFS=: d p=
  for d in $PATH; do [ "$d" = "$bindir" ] || { [ -z "$p" ] && p=$d || p=$p:$d; }; done
  PATH=$p exec "$name" "$@"
}
read -r port token root 2>/dev/null <"$HOME/.ccp/proxy.conf" || own "$@"
# The folder's path is a link (to the mount, or to the full mode's copy): a caller that resolved it (a
# program's getcwd) is under the link's target, and is told to the other side by the folder's own path.
here=$PWD
case "$here/" in
  "$root"/*) ;;
  *)
    real=$(cd "$root" 2>/dev/null && pwd -P) && [ -n "$real" ] || own "$@"
    phys=$(pwd -P)
    case "$phys/" in "$real"/*) here=$root/$(realpath -s --relative-to="$real" "$phys") ;; *) own "$@" ;; esac
    ;;
esac
if ! { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
  echo "ccp: not connected to your machine; running the workspace's $name" >&2
  own "$@"
fi
id=$$.$RANDOM$RANDOM
exec 4<>"/dev/tcp/127.0.0.1/$port" 5<>"/dev/tcp/127.0.0.1/$port" || exit 70
printf 'ccp1 %s %s out\n' "$token" "$id" >&4
printf 'ccp1 %s %s err\n' "$token" "$id" >&5
cat <&4 & out=$!
cat <&5 >&2 & err=$!
exec 4>&- 5>&-
stdin=0 in=
if [ ! -t 0 ]; then
  stdin=1
  # A background job's stdin would be /dev/null without the explicit <&0.
  (exec 6<>"/dev/tcp/127.0.0.1/$port" && printf 'ccp1 %s %s in\n' "$token" "$id" >&6 && exec cat >&6) <&0 & in=$!
fi
{ printf 'ccp1 %s %s run %s %s\n' "$token" "$id" "$#" "$stdin"; printf '%s\0' "$here" "$name" "$@"; } >&3
read -r word code <&3
wait "$out" "$err"
[ -n "$in" ] && kill "$in" 2>/dev/null
[ "$word" = EXIT ] && exit "$code"
echo "ccp: the connection to your machine ended before $name finished" >&2
exit 255
`;

/** Calls running at once; more are refused until one ends. */
export const MAX_RUNNING = 8;
/** Calls whose parts are still arriving. */
const MAX_PENDING = 64;
/** The bytes of a call's working directory, name and arguments (Linux takes about 2 MiB for a program's). */
export const MAX_ARGUMENT_BYTES = 1024 * 1024;
/** The bytes of stdin one call hands on. */
export const MAX_STDIN_BYTES = 64 * 1024 * 1024;

interface Pending {
  child?: ChildProcess;
  /** The child's output, held until its stream arrives (Node drops unread output once a child exits). */
  stdout?: PassThrough;
  stderr?: PassThrough;
  out?: Duplex;
  err?: Duplex;
  in?: Duplex;
  ctl?: Duplex;
  code?: number;
  /** Whether the command takes the workspace's stdin (unknown until the policy has answered). */
  takesStdin?: boolean;
  cleanup?: () => void;
  /** Counts the call out of the running ones. */
  release?: () => void;
  expired: NodeJS.Timeout;
}

/**
 * Runs the listed commands (and only those, as their policy allows: command-policy.ts) on this machine for
 * callers in the workspace whose working directory is under `root` (the mounted folder, the same path on both
 * sides).
 */
export class CommandProxy {
  private readonly token = randomBytes(16).toString('hex');
  private readonly pending = new Map<string, Pending>();
  private running = 0;
  /** Learnt on this machine at the first attach, before the workspace has run anything through the proxy. */
  private context?: Promise<PolicyContext>;

  constructor(
    private readonly names: readonly string[],
    private readonly root: string,
    /**
     * Brings both sides of the folder in step (the full mode's copy): run before a command, so that it sees
     * what the workspace wrote, and after it, so that the workspace sees what it changed.
     */
    private readonly sync: () => Promise<void> = async () => {},
    /** proxy_git_signing: whether the workspace may sign commits, tags and pushes with the user's key. */
    private readonly signing = false,
  ) {}

  /** Records the repository's remotes and the user's git settings, once: later attaches keep the first. */
  private prepare(): Promise<PolicyContext> {
    this.context ??= (async () => {
      const root = realpathSync.native(this.root);
      const mirrors = mkdtempSync(path.join(tmpdir(), 'ccp-git-objects-'));
      process.once('exit', () => rmSync(mirrors, { recursive: true, force: true }));
      return { root, git: await prepareGit(this.signing), remotes: await recordRemotes(root), mirrors };
    })();
    return this.context;
  }

  get enabled(): boolean {
    return this.names.length > 0;
  }

  /** The remote script that installs the wrappers (or removes them when the list is empty). */
  installScript(port: number | null): string {
    const lines = [`mkdir -p ${WRAPPER_DIR}`, `find ${WRAPPER_DIR} -mindepth 1 -maxdepth 1 -delete`];
    if (port === null || !this.enabled) {
      lines.push(`rm -f ${CONF}`);
      return lines.join('\n');
    }
    lines.push(
      `cat >$HOME/.ccp/proxy-command <<'CCP_WRAPPER'\n${WRAPPER}CCP_WRAPPER`,
      'chmod 0755 $HOME/.ccp/proxy-command',
      ...this.names.map((name) => `ln -s ../proxy-command ${WRAPPER_DIR}/${name}`),
      `(umask 077; printf '%s %s %s\\n' ${port} ${this.token} '${this.root.replaceAll("'", `'\\''`)}' >${CONF})`,
    );
    return lines.join('\n');
  }

  /** Asks the workspace to listen on a loopback port whose connections come back here; returns the port. */
  async listen(client: Client): Promise<number> {
    if (this.names.includes('git')) await this.prepare();
    return new Promise((resolve, reject) => {
      client.forwardIn('127.0.0.1', 0, (error, port) => {
        if (error) return reject(error);
        client.on('tcp connection', (info, accept, rejectConnection) => {
          if (info.destPort !== port) return rejectConnection();
          this.serve(accept());
        });
        resolve(port);
      });
    });
  }

  private serve(stream: Duplex): void {
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const newline = buffered.indexOf(10);
      if (newline < 0) {
        if (buffered.length > 512) stream.destroy();
        return;
      }
      const [magic, token, id, kind, argc, stdin] = buffered.subarray(0, newline).toString('utf8').split(' ');
      if (magic !== 'ccp1' || token !== this.token || !id) return stream.destroy();
      const rest = buffered.subarray(newline + 1);
      if (kind !== 'run') {
        stream.off('data', onData);
        // Held until it is piped; a flowing stream without a reader would drop the input.
        stream.pause();
        if (rest.length > 0) stream.unshift(rest);
        if (kind === 'out' || kind === 'err' || kind === 'in') this.join(id, kind, stream);
        else stream.destroy();
        return;
      }
      const wanted = Number(argc) + 2;
      if (!Number.isInteger(wanted) || wanted > 100_000) return stream.destroy();
      if (rest.length > MAX_ARGUMENT_BYTES) {
        stream.off('data', onData);
        stream.resume();
        this.refuse(id, stream, `the arguments are longer than ${MAX_ARGUMENT_BYTES} bytes`, 126);
        return;
      }
      const fields = rest.toString('utf8').split('\0');
      if (fields.length <= wanted) return; // not all fields yet
      stream.off('data', onData);
      const [cwd = '', name = '', ...args] = fields.slice(0, wanted);
      this.run(id, stream, cwd, name, args, stdin === '1');
    };
    stream.on('data', onData);
    stream.on('error', () => {});
  }

  private entry(id: string): Pending {
    let entry = this.pending.get(id);
    if (!entry) {
      // The oldest half-made call gives way: the workspace cannot hold this side's memory with parts.
      if (this.pending.size >= MAX_PENDING) {
        const idle = [...this.pending].find(([, each]) => !each.child && !each.release);
        if (idle) this.drop(idle[0]);
      }
      // Parts of a call that never completes are dropped.
      const expired = setTimeout(() => this.drop(id), 30_000).unref();
      entry = { expired };
      this.pending.set(id, entry);
    }
    return entry;
  }

  private drop(id: string): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    clearTimeout(entry.expired);
    for (const stream of [entry.out, entry.err, entry.in, entry.ctl]) stream?.destroy();
    entry.child?.kill();
    entry.cleanup?.();
    entry.release?.();
    this.pending.delete(id);
  }

  private join(id: string, kind: 'out' | 'err' | 'in', stream: Duplex): void {
    const entry = this.entry(id);
    entry[kind] = stream;
    this.connect(id);
  }

  private refuse(id: string, ctl: Duplex, message: string, code: number): void {
    const entry = this.entry(id);
    entry.ctl = ctl;
    entry.code = code;
    const wait = setInterval(() => {
      if (!entry.err) return;
      clearInterval(wait);
      entry.err.end(`ccp: ${message}\n`);
      entry.out?.end();
      this.finish(id);
    }, 20);
    setTimeout(() => clearInterval(wait), 10_000).unref();
  }

  private run(id: string, ctl: Duplex, cwd: string, name: string, args: string[], stdin: boolean): void {
    if (!this.names.includes(name)) {
      this.refuse(id, ctl, `${name} is not in proxy_commands; it does not run on your machine`, 126);
      return;
    }
    if (this.running >= MAX_RUNNING) {
      this.refuse(
        id,
        ctl,
        `${MAX_RUNNING} commands already run on your machine for the workspace; try again when one has ended`,
        126,
      );
      return;
    }
    this.running++;
    let counted = true;
    const release = () => {
      if (counted) this.running--;
      counted = false;
    };
    this.entry(id).release = release;
    void this.sync()
      .catch(() => {})
      .then(() => this.start(id, ctl, cwd, name, args, stdin))
      .catch(() => this.refuse(id, ctl, `${name} could not be checked on your machine`, 126));
  }

  private async start(
    id: string,
    ctl: Duplex,
    cwd: string,
    name: string,
    args: string[],
    stdin: boolean,
  ): Promise<void> {
    let local: string;
    try {
      local = realpathSync.native(cwd);
    } catch {
      this.refuse(id, ctl, `${cwd} does not exist on your machine`, 126);
      return;
    }
    const context = await this.prepare();
    if (!isInside(local, context.root)) {
      this.refuse(id, ctl, `${cwd} is outside the mounted folder ${this.root}`, 126);
      return;
    }
    const verdict = await commandPolicy(name, args, local, context);
    if (!verdict.run) {
      this.refuse(id, ctl, verdict.reason, 126);
      return;
    }
    const entry = this.entry(id);
    entry.ctl = ctl;
    entry.cleanup = verdict.cleanup;
    entry.takesStdin = stdin && verdict.stdin;
    const child = spawn(name, verdict.args, {
      cwd: local,
      env: verdict.env,
      stdio: [entry.takesStdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    entry.child = child;
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    entry.stdout = stdout;
    entry.stderr = stderr;
    child.stdout?.pipe(stdout, { end: false });
    child.stderr?.pipe(stderr, { end: false });
    child.on('error', (error) => {
      entry.code = 127;
      stderr.write(`ccp: ${name} did not start on your machine: ${error.message}\n`);
    });
    child.on('close', (code, signal) => {
      stdout.end();
      stderr.end();
      entry.code ??= code ?? (signal ? 128 + 15 : 255);
      this.finish(id);
    });
    this.connect(id);
  }

  /** Wires whatever parts of a call have arrived; the child's output waits, paused, for its stream. */
  private connect(id: string): void {
    const entry = this.pending.get(id);
    const child = entry?.child;
    if (!entry || !child) return;
    if (entry.out && entry.stdout && !entry.stdout.listenerCount('data')) entry.stdout.pipe(entry.out);
    if (entry.err && entry.stderr && !entry.stderr.listenerCount('data')) entry.stderr.pipe(entry.err);
    if (entry.in && !entry.takesStdin) entry.in.destroy();
    else if (entry.in && child.stdin && !entry.in.listenerCount('data')) {
      entry.in.pipe(limited(MAX_STDIN_BYTES, entry.stderr)).pipe(child.stdin);
      child.stdin.on('error', () => {});
    }
  }

  private finish(id: string): void {
    const entry = this.pending.get(id);
    if (!entry || entry.code === undefined || !entry.ctl) return;
    const done = () => {
      entry.ctl?.end(`EXIT ${entry.code}\n`);
      clearTimeout(entry.expired);
      entry.in?.destroy();
      entry.cleanup?.();
      entry.release?.();
      this.pending.delete(id);
    };
    const child = entry.child;
    if (!child) {
      done();
      return;
    }
    // The status goes last, after all output has been handed over.
    const ended = (stream: Duplex | undefined) =>
      new Promise<void>((resolve) => {
        if (!stream) return resolve();
        if (stream.writableFinished) return resolve();
        stream.once('finish', () => resolve());
        stream.once('close', () => resolve());
      });
    const waitFor = setInterval(() => {
      if (!entry.out || !entry.err) return;
      clearInterval(waitFor);
      this.connect(id);
      void Promise.all([ended(entry.out), ended(entry.err), this.sync().catch(() => {})]).then(done);
    }, 20);
  }
}

/** Passes at most `bytes` on, then ends the stream (the command sees the end of its input) and says so. */
function limited(bytes: number, stderr: PassThrough | undefined): Transform {
  let passed = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const before = passed;
      passed += chunk.length;
      if (passed <= bytes) return done(null, chunk);
      if (before <= bytes) {
        stderr?.write(`ccp: stdin is cut at ${bytes} bytes\n`);
        this.push(chunk.subarray(0, bytes - before));
        this.push(null);
      }
      done();
    },
  });
}
