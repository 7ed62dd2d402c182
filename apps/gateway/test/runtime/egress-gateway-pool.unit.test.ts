import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { egressGatewayContainer, hostOfContainer, POOL_LABEL } from '../../src/runtime/container-specs.js';
import {
  EgressGatewayPool,
  gatewayFilesKey,
  type PooledGateway,
} from '../../src/runtime/egress-gateway-pool.js';

const files = { v2ray: '{}', ruleset: 'table inet ccp_egress {}', uplink: {} } as Parameters<
  typeof gatewayFilesKey
>[0];

/** Starts one entry through the pool's bookkeeping, as the runtime does, and settles it ready. */
function fill(
  pool: EgressGatewayPool,
  egressIpId: string,
  filesKey: string,
): { kept: boolean; entry: PooledGateway } {
  const { entry, generation } = pool.begin(egressIpId, filesKey);
  const ready = { ...entry, containerId: `c-${entry.id}`, pid: 100 };
  return { kept: pool.settle(filesKey, generation, ready), entry: ready };
}

describe('egress gateway pool bookkeeping', () => {
  it('keys gateways by their files and image', () => {
    const key = gatewayFilesKey(files, 'img:1');
    assert.equal(gatewayFilesKey({ ...files }, 'img:1'), key);
    assert.notEqual(gatewayFilesKey({ ...files, v2ray: '{"x":1}' }, 'img:1'), key);
    assert.notEqual(gatewayFilesKey(files, 'img:2'), key);
  });

  it('holds as many as it may per upstream and in all, and hands each out once', () => {
    const pool = new EgressGatewayPool({ dir: '/nonexistent', perUpstream: 2, max: 3 });
    assert.equal(pool.wanted('a'), 2);
    fill(pool, 'e1', 'a');
    assert.equal(pool.wanted('a'), 1);
    fill(pool, 'e1', 'a');
    assert.equal(pool.wanted('a'), 0);
    assert.equal(pool.wanted('b'), 1, 'the total caps another upstream');
    const first = pool.take('a');
    const second = pool.take('a');
    assert.ok(first && second && first.id !== second.id);
    assert.equal(pool.take('a'), null);
    assert.equal(new EgressGatewayPool({ dir: '/x', perUpstream: 0, max: 8 }).wanted('a'), 0);
  });

  it('gives up what an upstream was before, and keeps nothing that arrives after its retirement', () => {
    const pool = new EgressGatewayPool({ dir: '/nonexistent', perUpstream: 1, max: 8 });
    fill(pool, 'e1', 'old');
    fill(pool, 'e2', 'other');
    assert.deepEqual(
      pool.stale('e1', 'new').map((entry) => entry.filesKey),
      ['old'],
    );
    assert.equal(pool.take('old'), null);
    // Retired while one was starting: it is not kept.
    const { entry, generation } = pool.begin('e2', 'other2');
    assert.deepEqual(
      pool.retire('e2').map((gone) => gone.filesKey),
      ['other'],
    );
    assert.equal(pool.settle('other2', generation, { ...entry, containerId: 'c', pid: 1 }), false);
    // Retiring all reaches those of every upstream, and those on their way.
    fill(pool, 'e3', 'k3');
    const coming = pool.begin('e4', 'k4');
    assert.equal(pool.retire().length, 1);
    assert.equal(pool.settle('k4', coming.generation, { ...coming.entry, containerId: 'c', pid: 1 }), false);
    assert.equal(fill(pool, 'e4', 'k4').kept, true);
  });

  it("hands a taken gateway's files to the host, leaving a link where its container binds them", async () => {
    const root = await mkdtemp(path.join(tmpdir(), 'ccp-pool-unit-'));
    try {
      const pool = new EgressGatewayPool({ dir: path.join(root, 'egress-pool'), perUpstream: 1, max: 1 });
      const { entry } = fill(pool, 'e1', 'k');
      await mkdir(entry.dir, { recursive: true });
      await writeFile(path.join(entry.dir, 'v2ray.json'), '{}');
      const hostDir = path.join(root, 'egress', 'h1');
      await mkdir(hostDir, { recursive: true });
      await writeFile(path.join(hostDir, 'stale.json'), 'old');
      await pool.handOver(entry, hostDir);
      assert.deepEqual(await readdir(hostDir), ['v2ray.json']);
      assert.deepEqual(await readdir(entry.dir), ['v2ray.json'], 'the link leads to the same files');
      // Unbound entries go (a file left by a pooled gateway, a dangling link), the bound link and its target stay.
      await mkdir(path.join(root, 'egress-pool', 'pool-left'));
      await symlink(path.join(root, 'gone'), path.join(root, 'egress-pool', 'pool-dangling'));
      await pool.sweep(new Set([entry.dir]));
      assert.deepEqual(await readdir(path.join(root, 'egress-pool')), [path.basename(entry.dir)]);
      await pool.forget(entry.dir);
      assert.deepEqual(await readdir(path.join(root, 'egress-pool')), []);
      assert.deepEqual(await readdir(hostDir), ['v2ray.json'], "forgetting the link leaves the host's files");
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('a pooled egress gateway container', () => {
  const options = egressGatewayContainer({
    for: { pool: { id: 'pool-abc', egressIpId: 'e1', filesKey: 'k' } },
    image: 'ccp-egress-gateway:1',
    owner: 'gw1',
    configDir: '/data/runtime/egress-pool/pool-abc',
    limits: { memoryMb: 256, pids: 128 },
  });

  it('has no host until one takes it, and is not restarted by dockerd while it waits', () => {
    assert.equal(options.name, 'ccp-pool-pool-abc');
    assert.equal(options.Labels![POOL_LABEL], 'e1');
    assert.equal(hostOfContainer(options.Labels!, `/${options.name}`), null);
    assert.deepEqual(options.HostConfig!.RestartPolicy, { Name: 'no' });
  });

  it('belongs to the host whose name it was given', () => {
    assert.equal(hostOfContainer(options.Labels!, '/ccp-egress-h-1'), 'h-1');
    assert.equal(hostOfContainer(options.Labels!, 'ccp-egress-h-1'), 'h-1');
    assert.equal(hostOfContainer({}, '/ccp-egress-h-1'), null, 'not without the pool label');
    assert.equal(hostOfContainer({ 'cloud-cli-proxy.host': 'h-2' }, '/whatever'), 'h-2');
  });
});
