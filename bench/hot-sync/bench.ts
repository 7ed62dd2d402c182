// ccp's hot sync (`full` mount mode) over loopback: the initial copy of a tree of small files, an idle poll,
// restarts against the copy already there (without and with a history), and one edit. The workspace side is a folder on this machine
// reached through an SSH connection (an in-process ssh2 server) and OpenSSH's sftp-server.
// Run: node --conditions=source --import tsx bench/hot-sync/bench.ts   (BENCH_HOT_SYNC_FILES, BENCH_HOT_SYNC_FILE_BYTES)
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Client, SFTPWrapper } from 'ssh2';
import { HotSync } from '../../apps/cli/src/hot-sync.js';
import { KnownHosts } from '../../apps/cli/src/known-hosts.js';
import { connectSsh } from '../../apps/cli/src/ssh-connection.js';
import { startLocalSshd } from '../../apps/cli/test/helpers/local-sshd.js';
import { onCleanup, runBench } from '../lib/children.js';
import { fixed, printTable } from '../lib/report.js';

const bounded = (name: string, fallback: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor(Number(process.env[name] ?? fallback)) || fallback));

const FILES = bounded('BENCH_HOT_SYNC_FILES', 2000, 10, 50_000);
const FILE_BYTES = bounded('BENCH_HOT_SYNC_FILE_BYTES', 2048, 1, 1 << 20);
const PER_DIR = 50;

await runBench('hot-sync bench', 10 * 60_000, async () => {
  const work = mkdtempSync(path.join(tmpdir(), 'ccp-bench-hot-sync-'));
  onCleanup(async () => rmSync(work, { recursive: true, force: true }));
  const local = path.join(work, 'local');
  const remote = path.join(work, 'workspace');
  mkdirSync(remote);
  for (let i = 0; i < FILES; i++) {
    const dir = path.join(local, `dir-${Math.floor(i / PER_DIR)}`);
    if (i % PER_DIR === 0) mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `file-${i}.txt`), Buffer.alloc(FILE_BYTES, i % 251));
  }
  symlinkSync(local, path.join(work, 'cold'));

  const sshd = await startLocalSshd(process.env, undefined, true);
  onCleanup(async () => sshd.close());
  const clients: Client[] = [];
  onCleanup(async () => {
    for (const client of clients) client.end();
  });
  const openSftp = async () => {
    const client = await connectSsh(
      { host: '127.0.0.1', port: sshd.port, username: 'u', password: 'p' },
      new KnownHosts(path.join(work, 'known_hosts')),
    );
    clients.push(client);
    return new Promise<SFTPWrapper>((resolve, reject) =>
      client.sftp((error, sftp) => (error ? reject(error) : resolve(sftp))),
    );
  };
  const historyFile = path.join(work, 'history.json');
  const engineOn = (withHistory = true) =>
    new HotSync({
      localRoot: local,
      remoteRoot: remote,
      coldRoot: path.join(work, 'cold'),
      maxFileBytes: 50 * 1024 * 1024,
      pollMs: 600_000,
      onNotice: (text) => console.error(`notice: ${text}`),
      ...(withHistory ? { historyFile } : {}),
    });
  const timed = async (work: () => Promise<unknown>) => {
    const start = performance.now();
    await work();
    return performance.now() - start;
  };

  const rows: string[][] = [];
  const first = engineOn();
  onCleanup(() => first.stop());
  const sftp = await openSftp();
  rows.push(['initial sync, empty workspace folder', fixed(await timed(() => first.attach(sftp)), 0)]);
  rows.push(['full pass, nothing changed (one poll)', fixed(await timed(() => first.flush()), 0)]);
  writeFileSync(path.join(local, 'dir-0', 'file-0.txt'), 'edited\n');
  rows.push(['full pass after one local edit', fixed(await timed(() => first.flush()), 0)]);
  await first.stop();

  const second = engineOn(false);
  onCleanup(() => second.stop());
  const again = await openSftp();
  rows.push([
    'restart without a history: first sync against the copy already there (content compared)',
    fixed(await timed(() => second.attach(again)), 0),
  ]);
  await second.stop();

  const third = engineOn();
  onCleanup(() => third.stop());
  const onceMore = await openSftp();
  rows.push([
    "restart with the last run's history (signatures compared)",
    fixed(await timed(() => third.attach(onceMore)), 0),
  ]);
  console.log(
    `\nhot sync, ${FILES} files of ${FILE_BYTES} bytes in ${Math.ceil(FILES / PER_DIR)} folders, loopback`,
  );
  printTable(['step', 'ms'], rows);
});
