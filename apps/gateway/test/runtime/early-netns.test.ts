import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readlinkSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { needs } from '../../../../test/support/needs.js';
import { HeldNetns, watchNetns } from '../../src/runtime/early-netns.js';
import { buildTestImages } from '../helpers/lab-egress.js';

const exec = promisify(execFile);

/** The namespace the path check's program is started in while Docker is still starting the workspace. */
describe("a container's network namespace, seen while Docker starts it", { skip: needs('docker') }, () => {
  const name = `ccp-test-early-${randomBytes(3).toString('hex')}`;
  let id: string;

  before(async () => {
    const { workspace } = await buildTestImages();
    // Like a workspace (container-specs.ts): no network of Docker's at all, which the CLI cannot ask for.
    const made = await new Docker().createContainer({
      name,
      Image: workspace,
      Entrypoint: ['sleep', '300'],
      Labels: { 'cloud-cli-proxy.test': 'early-netns' },
      NetworkDisabled: true,
      HostConfig: { NetworkMode: 'none' },
    });
    id = made.id;
  });

  after(async () => {
    await exec('docker', ['rm', '-f', name]).catch(() => undefined);
  });

  it('is found before the start returns, and is the started container’s own', async () => {
    for (let round = 0; round < 3; round++) {
      const starting = exec('docker', ['start', name]);
      let returnedAt = 0;
      starting.then(
        () => {
          returnedAt = performance.now();
        },
        () => {},
      );
      const held = await watchNetns(id, starting);
      const seenAt = performance.now();
      await starting;
      assert.ok(held, 'no namespace was seen');
      assert.ok(seenAt < returnedAt, `seen ${Math.round(seenAt - returnedAt)} ms after the start returned`);
      const pid = Number((await exec('docker', ['inspect', '-f', '{{.State.Pid}}', name])).stdout.trim());
      assert.equal(held.holds(pid), true);
      assert.equal(readlinkSync(`/proc/${pid}/ns/net`), `net:[${held.inode}]`);
      // What nsenter enters through the held path is that namespace.
      const entered = await exec('nsenter', [`--net=${held.path}`, '--', 'readlink', '/proc/self/ns/net']);
      assert.equal(entered.stdout.trim(), `net:[${held.inode}]`);
      held.release();
      await exec('docker', ['stop', '-t', '0', name]);
    }
  });

  it('tells another namespace from the container’s, so one seen early is not trusted blindly', async () => {
    const other = spawn('unshare', ['--net', '--', 'sleep', '60'], { stdio: 'ignore' });
    try {
      const own = readlinkSync('/proc/self/ns/net');
      for (let tries = 0; readlinkSync(`/proc/${other.pid}/ns/net`) === own; tries++) {
        assert.ok(tries < 100, 'unshare made no namespace');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const held = HeldNetns.of(other.pid!);
      assert.ok(held);
      assert.equal(held.holds(other.pid!), true);
      assert.equal(held.holds(process.pid), false);
      await exec('docker', ['start', name]);
      const pid = Number((await exec('docker', ['inspect', '-f', '{{.State.Pid}}', name])).stdout.trim());
      assert.equal(held.holds(pid), false);
      held.release();
    } finally {
      other.kill();
      await exec('docker', ['stop', '-t', '0', name]).catch(() => undefined);
    }
  });

  it('ends with nothing seen when the start fails before the container runs', async () => {
    await exec('docker', ['rm', '-f', name]);
    const failing = exec('docker', ['start', name]);
    failing.catch(() => {});
    assert.equal(await watchNetns(id, failing), null);
  });
});
