/** The containers of a host as the runtime asks Docker for them: what keeps a workspace contained, without Docker. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  EGRESS_GATEWAY_CAPABILITIES,
  egressGatewayContainer,
  HOST_LABEL,
  OWNER_LABEL,
  WORKSPACE_CAPABILITIES,
  workspaceContainer,
  workspaceSpecHash,
} from '../../src/runtime/container-specs.js';
import { HostLock } from '../../src/runtime/host-lock.js';
import type { WorkspaceSpec } from '../../src/runtime/workspace-runtime.js';

const spec: WorkspaceSpec = {
  hostId: 'h-1',
  shortId: 'Ab3_x',
  linuxUser: 'alice',
  authorizedKey: 'ssh-ed25519 AAAA gateway',
  desktopPassword: 'desk-pw1',
  limits: { memoryMb: 512, cpus: 1.5, pids: 256, homeMb: 1024 },
};

describe('workspace container', () => {
  const options = workspaceContainer({
    spec,
    image: 'ccp-workspace:test-1',
    owner: 'gw1',
    resolvConf: '/data/runtime/workspace-resolv.conf',
    mountsDir: '/run/ccp/mounts/h-1',
  });
  const host = options.HostConfig!;

  it('has no network of its own and no capability that could change one', () => {
    assert.equal(host.NetworkMode, 'none');
    // Not even Docker's empty one: runc makes the namespace, and dockerd's network hook is skipped.
    assert.equal(options.NetworkDisabled, true);
    assert.deepEqual(host.CapDrop, ['ALL']);
    for (const forbidden of ['NET_ADMIN', 'NET_RAW', 'SYS_ADMIN'])
      assert.ok(!host.CapAdd!.includes(forbidden), `${forbidden} must never be granted`);
    assert.deepEqual(host.CapAdd, [...WORKSPACE_CAPABILITIES]);
    assert.equal(host.Sysctls!['net.ipv6.conf.all.disable_ipv6'], '1');
  });

  it('resolves through the gateway end of the link only, from a file it cannot change', () => {
    const resolv = host.Mounts!.find((mount) => mount.Target === '/etc/resolv.conf');
    assert.deepEqual(resolv, {
      Type: 'bind',
      Source: '/data/runtime/workspace-resolv.conf',
      Target: '/etc/resolv.conf',
      ReadOnly: true,
    });
  });

  it('is limited in memory (no swap beyond it), CPU and processes, and keeps home in its volume', () => {
    assert.equal(host.Memory, 512 * 1024 * 1024);
    assert.equal(host.MemorySwap, host.Memory);
    assert.equal(host.NanoCpus, 1.5e9);
    assert.equal(host.PidsLimit, 256);
    assert.ok(host.Mounts!.some((m) => m.Source === 'ccp-home-h-1' && m.Target === '/home/alice'));
    assert.deepEqual(host.Binds, ['/run/ccp/mounts/h-1:/run/ccp-mounts:ro,rslave']);
  });

  it('carries its host, owner and spec labels, and a hostname made safe from the short id', () => {
    assert.equal(options.Labels![HOST_LABEL], 'h-1');
    assert.equal(options.Labels![OWNER_LABEL], 'gw1');
    assert.equal(options.Hostname, 'ccp-ab3-x');
  });

  it('is made again when what it was made from changes, not for a new image or new limits alone', () => {
    const hash = workspaceSpecHash(spec, null);
    assert.equal(workspaceSpecHash({ ...spec }, null), hash);
    // Limits are applied in place (docker update), keeping what the user installed in the container.
    assert.equal(workspaceSpecHash({ ...spec, limits: { ...spec.limits, pids: 512 } }, null), hash);
    assert.notEqual(workspaceSpecHash({ ...spec, linuxUser: 'other' }, null), hash);
    assert.notEqual(workspaceSpecHash(spec, '/run/ccp/mounts/h-1'), hash);
  });
});

describe('egress gateway container', () => {
  const options = egressGatewayContainer({
    for: { hostId: 'h-1' },
    image: 'ccp-egress-gateway:1',
    owner: 'gw1',
    configDir: '/data/runtime/egress/h-1',
    caFile: '/etc/ccp/probe-ca.pem',
    limits: { memoryMb: 256, pids: 128 },
  });
  const host = options.HostConfig!;

  it('forwards nothing, speaks no IPv6 and gains no privileges', () => {
    assert.equal(host.Sysctls!['net.ipv4.ip_forward'], '0');
    assert.equal(host.Sysctls!['net.ipv6.conf.all.disable_ipv6'], '1');
    assert.deepEqual(host.SecurityOpt, ['no-new-privileges']);
    assert.deepEqual(host.CapAdd, [...EGRESS_GATEWAY_CAPABILITIES]);
    assert.ok(
      options.Env!.includes(
        'EGRESS_SYSCTLS=net.ipv4.ip_forward=0 net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 net.ipv4.ip_nonlocal_bind=1',
      ),
    );
  });

  it('reads its files read-only, trusts the probe CA when one is set, and runs the relay', () => {
    assert.deepEqual(host.Binds, [
      '/data/runtime/egress/h-1:/etc/ccp-egress:ro',
      '/etc/ccp/probe-ca.pem:/usr/local/share/ccp-egress/ca.pem:ro',
    ]);
    assert.ok(options.Env!.includes('SSL_CERT_FILE=/usr/local/share/ccp-egress/ca.pem'));
    assert.ok(options.Env!.includes('EGRESS_RELAY_PORTS=22 6080'));
  });
});

describe('HostLock', () => {
  it('runs one operation per host at a time, in order, and a failure does not stop the next', async () => {
    const lock = new HostLock();
    const order: string[] = [];
    const step =
      (name: string, ms: number, fail = false) =>
      async () => {
        order.push(`${name} begins`);
        await new Promise((resolve) => setTimeout(resolve, ms));
        order.push(`${name} ends`);
        if (fail) throw new Error(name);
        return name;
      };
    const results = await Promise.allSettled([
      lock.run('a', step('a1', 30, true)),
      lock.run('a', step('a2', 1)),
      lock.run('b', step('b1', 5)),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['rejected', 'fulfilled', 'fulfilled'],
    );
    assert.ok(order.indexOf('a1 ends') < order.indexOf('a2 begins'), 'a2 waited for a1');
    assert.ok(order.indexOf('b1 ends') < order.indexOf('a1 ends'), 'another host did not wait');
  });
});
