import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import ssh2 from 'ssh2';
import { generateEd25519 } from '../../gateway/src/domain/users/ssh-public-key.js';
import { sendAuthBanner } from '../../gateway/src/ssh/ssh2-internals.js';
import { exitCodeOf, HostStoppedError } from '../src/errors.js';
import { KnownHosts } from '../src/known-hosts.js';
import { connectSsh } from '../src/ssh-connection.js';
import { RESTORE_TERMINAL } from '../src/terminal.js';
import {
  attachScript,
  failureShellScript,
  sessionCommandLine,
  sessionEndedMessage,
  takeStatusScript,
} from '../src/tmux.js';

describe('a session command that ends with a failure', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ccp-session-end-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  // A stand-in tmux: new-session runs its command and ends with 0 (as tmux does); no session outlives it.
  const fakeTmux = path.join(dir, 'tmux');
  writeFileSync(
    fakeTmux,
    '#!/bin/sh\ncase "$1" in new-session) for a; do last=$a; done; sh -c "$last"; exit 0;; esac\nexit 1\n',
  );
  chmodSync(fakeTmux, 0o755);
  // The user's shell, which the pane runs after a failed command: it says where it started.
  const userShell = path.join(dir, 'user-shell');
  writeFileSync(userShell, '#!/bin/sh\necho "user shell in $PWD"\n');
  chmodSync(userShell, 0o755);
  const run = (script: string) =>
    execFileSync('sh', ['-c', script], {
      env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, SHELL: userShell },
      stdio: ['ignore', 'pipe', 'ignore'],
    }).toString();
  const attachWith = (name: string, command: string) =>
    run(
      attachScript({
        name,
        cwd: dir,
        fresh: false,
        takeOver: false,
        commandLine: sessionCommandLine(command, []),
        pathPrefix: dir,
        onFailure: failureShellScript(command, '/home/me/.config/ccp/config.yaml'),
      }),
    );

  it('keeps its output in the pane, says what ended and how to choose another command, then gives a shell', () => {
    const pane = attachWith(`t-${process.pid}-c`, "sh -c 'echo cannot reach the API; exit 3'");
    const lines = pane.split('\n');
    assert.equal(lines[0], 'cannot reach the API');
    assert.match(
      pane,
      /ccp: the session command `sh -c 'echo cannot reach the API; exit 3'` exited with status 3; its output is above\./,
    );
    assert.match(pane, /ccp --session-command <command>/);
    assert.match(pane, /session_command in \/home\/me\/\.config\/ccp\/config\.yaml/);
    assert.equal(lines.at(-2), `user shell in ${dir}`);
    assert.match(attachWith(`t-${process.pid}-d`, "sh -c 'exit 127'"), /status 127 \(command not found\)/);
    assert.match(
      attachWith(`t-${process.pid}-e`, "sh -c 'kill -INT $$'"),
      /status 130 \(killed by signal 2\)/,
    );
    // Each left its status for the client, which takes it (and with it the file in /tmp).
    const statuses = ['c', 'd', 'e'].map((end) => run(takeStatusScript(`t-${process.pid}-${end}`)).trim());
    assert.deepEqual(statuses, ['3', '127', '130']);
  });

  it('leaves its status for the client, which is told what ended and how', () => {
    const name = `t-${process.pid}-a`;
    attachWith(name, "sh -c 'exit 127'");
    assert.equal(run(takeStatusScript(name)).trim(), '127');
    // Taken once: a later attach does not hear of it again.
    assert.equal(run(takeStatusScript(name)).trim(), '');
    assert.equal(
      sessionEndedMessage('claude', 127),
      'the session command `claude` ended with status 127 (command not found)',
    );
    assert.equal(
      sessionEndedMessage('claude', 130),
      'the session command `claude` ended with status 130 (killed by signal 2)',
    );
  });

  it('leaves nothing when the command ends well, and no shell after it', () => {
    const name = `t-${process.pid}-b`;
    assert.equal(attachWith(name, 'true'), '');
    assert.equal(run(takeStatusScript(name)).trim(), '');
  });
});

describe('a host stopped while connected', () => {
  /** What connecting to a proxy that refuses with this banner throws. */
  const refusedWith = async (banner: string): Promise<Error> => {
    const server = new ssh2.Server({ hostKeys: [generateEd25519('test host').privateKey] }, (connection) => {
      connection.on('authentication', (ctx) => {
        if (ctx.method === 'none') return ctx.reject(['password']);
        sendAuthBanner(connection, banner);
        ctx.reject(['password']);
        connection.end();
      });
      connection.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const dir = mkdtempSync(path.join(tmpdir(), 'ccp-stopped-'));
    try {
      const port = (server.address() as AddressInfo).port;
      return await connectSsh(
        { host: '127.0.0.1', port, username: 'alice+k3m9x2qa', password: 'secret' },
        new KnownHosts(path.join(dir, 'known_hosts')),
      ).then(
        () => assert.fail('connected'),
        (failure: Error) => failure,
      );
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it("is told as a stop (exit 6), with the gateway's words, not as refused credentials", async () => {
    const error = await refusedWith(
      'cloud-cli-proxy: host k3m9x2qa is stopped; start it with the Start button',
    );
    assert.ok(error instanceof HostStoppedError, String(error));
    assert.equal(exitCodeOf(error), 6);
    assert.match(error.message, /host k3m9x2qa was stopped \(the gateway did not say by whom\)/);
    assert.match(error.message, /start it with the Start button/);
  });

  it('names who stopped the host when the gateway says so', async () => {
    const byAdmin = await refusedWith(
      'cloud-cli-proxy: host k3m9x2qa is stopped (stopped by the administrator root at 2026-11-24T13:52:01Z); start it with the Start button',
    );
    assert.ok(byAdmin instanceof HostStoppedError, String(byAdmin));
    assert.match(
      byAdmin.message,
      /^host k3m9x2qa was stopped by the administrator root at 2026-11-24T13:52:01Z; the session ended with it\./,
    );
    const byOwner = await refusedWith(
      'cloud-cli-proxy: host k3m9x2qa is stopping (stopped by you (alice) at 2026-11-24T13:52:01Z); start it',
    );
    assert.match(byOwner.message, /^host k3m9x2qa was stopped by you \(alice\) at 2026-11-24T13:52:01Z;/);
  });

  it('restores the terminal tmux leaves: normal screen, scroll region, cursor', () => {
    for (const sequence of ['\u001b[?1049l', '\u001b[r', '\u001b[?25h'])
      assert.ok(RESTORE_TERMINAL.includes(sequence));
  });
});
