import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access, chmod, copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';

export interface Run {
  code: number | null;
  output: string;
}

/** Runs a command to completion with `stdin` as its input (configs go in this way, never to disk). */
export function run(command: string, args: readonly string[], stdin = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
    child.stdin.end(stdin);
  });
}

async function findOnPath(name: string): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    if (
      await access(candidate, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return candidate;
  }
  return undefined;
}

export interface V2rayBinary {
  path: string;
  dispose(): Promise<void>;
}

/** The installed v2ray 4.x, or a plain copy of it where its file capabilities make exec fail. */
export async function locateV2ray(): Promise<V2rayBinary> {
  const found = await findOnPath(v2rayEngine.defaultCommand);
  assert.ok(found, 'v2ray is not installed: apt-get install v2ray (listed in scripts/test-packages.txt)');
  let binary: V2rayBinary = { path: found, dispose: async () => {} };
  try {
    await run(found, ['-version']);
  } catch (error) {
    // Debian's binary carries cap_net_bind_service; where that cannot be granted, exec fails with EPERM.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error;
    const dir = await mkdtemp(join(tmpdir(), 'ccp-v2ray-'));
    binary = { path: join(dir, 'v2ray'), dispose: () => rm(dir, { recursive: true, force: true }) };
    await copyFile(found, binary.path);
    await chmod(binary.path, 0o755);
  }
  const { output } = await run(binary.path, ['-version']);
  assert.match(output, /^V2Ray 4\./, 'these configs target v2ray 4.x');
  return binary;
}
