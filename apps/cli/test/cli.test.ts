import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../test/lab/lab.js';
import { freePort } from '../../gateway/test/helpers/lab-gateway.js';
import type { PtySession } from '../../gateway/test/helpers/pty-session.js';
import { CcpWorkspace } from './helpers/ccp-workspace.js';
import { PausableRelay } from './helpers/pausable-relay.js';

const skip = labUnavailable();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('ccp, the command-line client, against a real workspace', { skip, timeout: 1_200_000 }, () => {
  const suffix = randomBytes(3).toString('hex');
  const w = new CcpWorkspace('cli', { session_command: 'bash --norc' });
  const { work, project } = w;
  let relay: PausableRelay;
  const { client, ccp, run } = w.driver;
  const listSessions = async (configHome: string) => {
    const result = await run(configHome, ['sessions', '--json']);
    assert.equal(result.code, 0, result.stderr);
    return JSON.parse(result.stdout) as Array<{
      name: string;
      created_at: string;
      attached_clients: number;
      windows: number;
    }>;
  };
  /** Types a command and waits for its marked output, proving the shell in the session runs it. */
  const prove = async (session: PtySession, label: string) => {
    session.type(`echo ${label}-$((6*7))\r`);
    await session.waitFor(`${label}-42`, 30_000);
  };

  before(async () => {
    // The SSH proxy listens on 127.0.0.1; the relay the test can cut is what the gateway tells clients.
    const sshPort = await freePort();
    relay = new PausableRelay('127.0.0.2', sshPort, '127.0.0.1', sshPort);
    await relay.listen();
    await w.start({ sshPort, publicHost: '127.0.0.2' });
    // The local project: a git repository that exists only on this machine.
    execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: project });
    writeFileSync(path.join(project, 'README.md'), 'local only\n');
    execFileSync('git', ['add', '.'], { cwd: project });
    execFileSync(
      'git',
      ['-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-qm', `local-commit-${suffix}`],
      {
        cwd: project,
      },
    );
  });

  after(async () => {
    await w.stop();
    await relay?.close();
  });

  it('exit codes: 4 for configuration, 1 for a wrong password, 2 for an unreachable gateway, 3 when the start takes too long', async () => {
    const none = path.join(work, 'client-none');
    const missing = await run(none, ['sessions']);
    assert.equal(missing.code, 4, missing.stderr);
    assert.match(missing.stderr, /no configuration .*ccp init/);
    const invalid = client('invalid', { proxy_commands: 'git', mount_mode: 'fast' });
    const bad = await run(invalid, ['sessions']);
    assert.equal(bad.code, 4, bad.stderr);
    assert.match(bad.stderr, /proxy_commands: must be a list/);
    assert.match(bad.stderr, /mount_mode: must be one of auto, full, sshfs-only/);

    const a = client('codes');
    const wrong = await run(a, ['sessions'], { CCP_PASSWORD: 'not-the-password' });
    assert.equal(wrong.code, 1, wrong.stderr);
    assert.match(wrong.stderr, /wrong password/);

    const closed = client('closed', { gateway: `http://127.0.0.1:${await freePort()}` });
    const unreachable = await run(closed, ['sessions']);
    assert.equal(unreachable.code, 2, unreachable.stderr);
    assert.match(unreachable.stderr, /cannot reach the gateway/);

    // The host is stopped: the first answer is "starting", and no wait at all is allowed for.
    const slow = await run(a, ['sessions', '--wait', '0']);
    assert.equal(slow.code, 3, slow.stderr);
    assert.match(slow.stderr, /did not become ready within 0 s/);
  });

  it('attaches two clients to one session, starts a new one, takes over, and lists them (also --json)', async () => {
    const a = client('a');
    const b = client('b');
    const first = ccp(a, '');
    await first.waitFor(/ccp: session (\S+)/, 600_000);
    const name = /ccp: session (\S+)/.exec(first.screen)?.[1] ?? '';
    await prove(first, 'FIRST');
    const second = ccp(b, '');
    await second.waitFor(`ccp: session ${name}`);
    // The second client sees the same screen, so it is the same session.
    await second.waitFor('FIRST-42');
    await prove(second, 'SECOND');
    await first.waitFor('SECOND-42');
    let listed = await listSessions(a);
    const shared = listed.find((s) => s.name === name);
    assert.equal(shared?.attached_clients, 2, JSON.stringify(listed));
    assert.equal(shared?.windows, 1);
    assert.ok(Math.abs(Date.parse(shared?.created_at ?? '') - Date.now()) < 600_000);
    const table = await run(a, ['sessions']);
    assert.match(table.stdout, /^SESSION\s+CREATED\s+CLIENTS\s+WINDOWS$/m);
    assert.match(table.stdout, new RegExp(`^${name}\\s.*\\s2\\s+1$`, 'm'));

    const fresh = ccp(b, '--new-session');
    await fresh.waitFor(/ccp: session (\S+)/);
    const freshName = /ccp: session (\S+)/.exec(fresh.screen)?.[1] ?? '';
    assert.notEqual(freshName, name);
    await prove(fresh, 'FRESH');
    listed = await listSessions(a);
    assert.equal(listed.find((s) => s.name === freshName)?.attached_clients, 1);
    assert.equal(listed.length, 2);
    fresh.type('exit\r');
    assert.equal(await fresh.exitCode(30_000), 0, fresh.screen);

    const taker = ccp(a, '--take-over');
    await taker.waitFor(`ccp: session ${name}`);
    // The others are told, then detached; their ccp ends.
    await first.waitFor('another client is taking over');
    assert.equal(await first.exitCode(30_000), 0, first.screen);
    assert.equal(await second.exitCode(30_000), 0, second.screen);
    assert.match(first.screen, /detached/);
    await prove(taker, 'TAKER');
    listed = await listSessions(a);
    assert.equal(listed.find((s) => s.name === name)?.attached_clients, 1, JSON.stringify(listed));
    taker.type('exit\r');
    assert.equal(await taker.exitCode(30_000), 0);
  });

  it('mount modes: sshfs-only and full show the local folder at its own path, writes inside land here, big files stay on sshfs', async () => {
    writeFileSync(path.join(project, 'small.txt'), 'small local file\n');
    const big = Buffer.alloc(3 * 1024 * 1024, 7);
    writeFileSync(path.join(project, 'big.bin'), big);
    const bigSum = createHash('md5').update(big).digest('hex');
    /** Runs shell lines in the session and returns what they printed between two markers. */
    const shell = async (session: PtySession, label: string, lines: string) => {
      session.type(`echo ${label}-BEGIN; ${lines}; echo ${label}-END-$((6*7))\r`);
      await session.waitFor(`${label}-END-42`, 60_000);
      const screen = session.screen;
      return screen.slice(screen.lastIndexOf(`${label}-BEGIN`), screen.lastIndexOf(`${label}-END-42`));
    };
    const until = async (check: () => boolean | Promise<boolean>, what: string) => {
      for (let i = 0; i < 150 && !(await check()); i++) await sleep(200);
      assert.ok(await check(), `${what} within 30 s`);
    };

    const a = client('mount-sshfs', { mount_mode: 'sshfs-only' });
    const plain = ccp(a, '--session mount1');
    await plain.waitFor(/ccp: mount: sshfs-only/, 600_000);
    await prove(plain, 'MNT1');
    const seen = await shell(
      plain,
      'S1',
      `cd '${project}' && cat small.txt && findmnt -T . -no FSTYPE && md5sum big.bin && echo from-ws-1 > inside1.txt`,
    );
    assert.match(seen, /small local file/);
    assert.match(seen, /fuse\.sshfs/);
    assert.ok(seen.includes(bigSum), seen);
    assert.equal(readFileSync(path.join(project, 'inside1.txt'), 'utf8'), 'from-ws-1\n');
    // What npm does in the folder: a package's command linked from node_modules/.bin with `../`, then run by name.
    const npmShaped = await shell(
      plain,
      'NPM',
      `cd '${project}' && mkdir -p node_modules/greeter node_modules/.bin && printf '#!/bin/sh\\necho greeted\\n' > node_modules/greeter/cli.sh && chmod +x node_modules/greeter/cli.sh && ln -s ../greeter/cli.sh node_modules/.bin/greet && node_modules/.bin/greet; ln -s ../../../etc node_modules/.bin/away || echo refused-away`,
    );
    assert.match(npmShaped, /greeted/);
    assert.match(npmShaped, /refused-away/);
    assert.equal(readlinkSync(path.join(project, 'node_modules/.bin/greet')), '../greeter/cli.sh');
    rmSync(path.join(project, 'node_modules'), { recursive: true, force: true });
    plain.type('exit\r');
    assert.equal(await plain.exitCode(30_000), 0, plain.screen);
    rmSync(path.join(project, 'inside1.txt'));
    // Earlier tests mounted in the default mode (full: layout directory); this one is the only link.
    const linkEvents = async (type: string) =>
      (
        (await w.lab.t.request('GET', `/v1/admin/events?type=${type}&user_id=${w.user.id}&limit=500`))
          .body as {
          events: Array<{ data: { path: string; layout: string } }>;
        }
      ).events.filter((e) => e.data.layout === 'link');
    // The keeper may mount again within the session (it restores a mount it sees drop); each one is this folder.
    const opened = (await linkEvents('ssh.mount.opened')).map((e) => e.data.path);
    assert.ok(opened.length >= 1);
    assert.deepEqual([...new Set(opened)], [project]);
    await until(async () => (await linkEvents('ssh.mount.closed')).length >= 1, 'the unmount is logged');

    const b = client('mount-full', { mount_mode: 'full', hot_sync_max_file_mb: 1 });
    const full = ccp(b, '--session mount2');
    await full.waitFor(/ccp: mount: full/, 600_000);
    await prove(full, 'MNT2');
    const tree = await shell(
      full,
      'F1',
      `cd '${project}' && cat small.txt && echo "small:$(findmnt -T small.txt -no FSTYPE)" && echo "big:$(findmnt -T big.bin -no FSTYPE)" && md5sum big.bin && echo from-ws-2 > inside2.txt`,
    );
    assert.match(tree, /small local file/);
    // The small file is a copy on the workspace's own disk; the one over the limit is read through sshfs.
    assert.doesNotMatch(tree, /small:fuse/);
    assert.match(tree, /big:fuse\.sshfs/);
    assert.ok(tree.includes(bigSum), tree);
    await until(() => existsSync(path.join(project, 'inside2.txt')), 'a file written inside appears here');
    assert.equal(readFileSync(path.join(project, 'inside2.txt'), 'utf8'), 'from-ws-2\n');
    writeFileSync(path.join(project, 'small.txt'), 'changed locally\n');
    const changed = await shell(
      full,
      'F2',
      `for i in $(seq 1 100); do grep -q changed small.txt && break; sleep 0.2; done; cat small.txt`,
    );
    assert.match(changed, /changed locally/);
    full.type('exit\r');
    assert.equal(await full.exitCode(30_000), 0, full.screen);

    // The next run remembers what was synced: a file deleted here meanwhile goes in the workspace too.
    assert.equal(readdirSync(path.join(b, 'ccp', 'hot-sync')).length, 1);
    rmSync(path.join(project, 'inside2.txt'));
    const again = ccp(b, '--session mount3');
    await again.waitFor(/ccp: mount: full/, 600_000);
    const listed = await shell(again, 'F3', `cd '${project}' && ls`);
    assert.match(listed, /small\.txt/);
    assert.doesNotMatch(listed, /inside2\.txt/);
    assert.equal(existsSync(path.join(project, 'inside2.txt')), false);
    again.type('exit\r');
    assert.equal(await again.exitCode(30_000), 0, again.screen);
    for (const name of ['small.txt', 'big.bin', 'inside2.txt'])
      rmSync(path.join(project, name), { force: true });
  });

  it('proxy_commands: git in the workspace acts on the local repository; other names never run locally; [] turns it off', async () => {
    const a = client('proxy');
    const session = ccp(a, '--session proxy');
    await session.waitFor('ccp: session proxy', 600_000);
    await prove(session, 'READY');
    // Output and status on one line: tmux may redraw its status bar between two lines of the screen.
    session.type(`cd '${project}' && out=$(git log --format=%s); echo "RC=$?:$out"\r`);
    await session.waitFor(/RC=\d+:/);
    assert.match(session.screen, new RegExp(`RC=0:local-commit-${suffix}`));
    // Also from the folder's resolved path (a program's getcwd), and from a folder inside it.
    session.type(
      `mkdir -p sub && cd -P sub && pwd -P && out=$(git log --format=%s); echo "RCP=$?:$out"; cd '${project}'\r`,
    );
    await session.waitFor(/RCP=\d+:/);
    assert.match(session.screen, /\.ccp\/hot\/[0-9a-f]+\/sub/);
    assert.match(session.screen, new RegExp(`RCP=0:local-commit-${suffix}`));
    // In the full mode both sides are brought in step around each command: git sees the edit just made in
    // the workspace, and the workspace sees at once what git changed here.
    session.type(
      'echo edited >> README.md && git diff --stat; git checkout -- README.md; out=$(cat README.md); echo "RCS=$?:$out"\r',
    );
    await session.waitFor(/RCS=\d+:/);
    assert.match(session.screen, /README\.md \| 1 \+/);
    assert.match(session.screen, /RCS=0:local only/);
    // stdin is streamed, and the status comes back.
    session.type(
      'printf hello | git hash-object --stdin; git show no-such-ref >/dev/null 2>&1; echo "RC2=$?"\r',
    );
    await session.waitFor(/RC2=\d+/);
    const expected = execFileSync('git', ['hash-object', '--stdin'], { input: 'hello' }).toString().trim();
    assert.ok(session.screen.includes(expected), session.screen);
    assert.match(session.screen, /RC2=128/);
    // A name that is not listed, sent to the proxy by hand, is refused and never runs here.
    const marker = path.join(work, `never-${suffix}`);
    session.type(
      `ln -sf ~/.ccp/proxy-command ./touch && ./touch '${marker}'; echo "RC3=$?"; rm -f ./touch\r`,
    );
    await session.waitFor(/RC3=\d+/);
    assert.match(session.screen, /touch is not in proxy_commands/);
    assert.match(session.screen, /RC3=126/);
    assert.equal(existsSync(marker), false);
    session.type('exit\r');
    assert.equal(await session.exitCode(30_000), 0);

    const off = client('proxy-off', { proxy_commands: [] });
    const plain = ccp(off, '--session proxyoff');
    await plain.waitFor('ccp: session proxyoff');
    await prove(plain, 'OFF');
    plain.type(`echo "WRAPPERS=$(ls ~/.ccp/bin 2>/dev/null | wc -l)"; echo "RC=$?"\r`);
    await plain.waitFor(/RC=\d+/);
    // No wrapper: git in the workspace is the workspace's own (reading the mounted repository, if at all).
    assert.match(plain.screen, /WRAPPERS=0/);
    plain.type('exit\r');
    assert.equal(await plain.exitCode(30_000), 0);
  });

  it('rides out a 10 s and a 20 s network cut (typed input delivered, proxy and folder restored); a 40 s cut exits 2', async (t) => {
    const a = client('cut');
    const session = ccp(a, '--session cut');
    await session.waitFor('ccp: session cut', 600_000);
    // The default mode, auto, got the best one.
    await session.waitFor(/ccp: mount: full \(/);
    await prove(session, 'BEFORE');

    relay.pause();
    await sleep(2000);
    session.type('echo TEN-$((6*7))\r');
    await sleep(8000);
    relay.resume();
    await session.waitFor('TEN-42', 30_000);

    relay.pause();
    await sleep(2000);
    session.type('echo TWENTY-$((6*7))\r');
    writeFileSync(path.join(project, 'during-cut.txt'), 'written during the outage\n');
    await sleep(18_000);
    relay.resume();
    await session.waitFor('TWENTY-42', 40_000);
    assert.match(session.screen, /reconnected after \d+ s/);
    session.type(`cd '${project}' && out=$(git log --format=%s); echo "RC=$?:$out"\r`);
    await session.waitFor(new RegExp(`RC=0:local-commit-${suffix}`));
    // The folder came back with the connection: what was written here meanwhile shows inside.
    session.type(
      'for i in $(seq 1 100); do [ -f during-cut.txt ] && break; sleep 0.2; done; out=$(cat during-cut.txt); echo "RC4=$?:$out"\r',
    );
    await session.waitFor(/RC4=\d+:/);
    assert.match(session.screen, /RC4=0:written during the outage/);
    rmSync(path.join(project, 'during-cut.txt'));

    const started = Date.now();
    relay.pause();
    const code = await session.exitCode(60_000);
    const took = Date.now() - started;
    relay.resume();
    assert.equal(code, 2, session.screen);
    assert.match(session.screen, /re-attach with: ccp attach --session cut/);
    t.diagnostic(`40 s cut: exit 2 after ${took} ms`);
    assert.ok(took >= 29_000 && took < 45_000, `gave up after ${took} ms`);
    // The session survived in the workspace.
    const listed = await listSessions(a);
    assert.ok(listed.some((s) => s.name === 'cut'));
  });

  it('init stores the gateway and short ID (the password only when asked) in a 0600 file', async () => {
    const home = path.join(work, 'client-init');
    const plain = await run(home, ['init', '--gateway', `${w.apiUrl}/`, '--short-id', w.shortId]);
    assert.equal(plain.code, 0, plain.stderr);
    const file = path.join(home, 'ccp', 'config.yaml');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const shown = JSON.parse((await run(home, ['config', '--json'])).stdout);
    assert.equal(shown.gateway, w.apiUrl);
    assert.equal(shown.password_saved, false);
    await run(home, ['init', '--save-password']);
    assert.equal(JSON.parse((await run(home, ['config', '--json'])).stdout).password_saved, true);
    const listed = await run(home, ['sessions', '--json'], { CCP_PASSWORD: '' });
    assert.equal(listed.code, 0, listed.stderr);
  });

  // Last: it stops the host.
  // A session command that fails is in first-run.test.ts.
  it('tells a stop by an admin as a stop (exit 6)', async () => {
    const session = ccp(client('stopped'), '--session stopped');
    await session.waitFor('ccp: session stopped', 600_000);
    await prove(session, 'ALIVE');
    const stop = await w.lab.t.request('POST', `/v1/admin/hosts/${w.hostId}/stop`);
    assert.equal(stop.status, 202, JSON.stringify(stop.body));
    assert.equal(await session.exitCode(90_000), 6, session.screen);
    assert.match(session.screen, /was stopped by the administrator admin at \d{4}-/);
    assert.doesNotMatch(session.screen.split('was stopped')[1] ?? '', /refused the workspace credentials/);
  });
});
