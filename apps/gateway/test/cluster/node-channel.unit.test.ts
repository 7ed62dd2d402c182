import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { HostDialer, HostUnreachable } from '../../src/cluster/host-dialer.js';
import { RuntimeError } from '../../src/runtime/workspace-runtime.js';
import { MemoryRuntime } from '../helpers/memory-runtime.js';
import { ChannelPeers } from '../helpers/node-channel-peers.js';
import { until } from '../helpers/openssh.js';

/** Reads from `socket` until `bytes` bytes came (or it ended), and returns them. */
function receive(socket: Socket, bytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let got = 0;
    const done = () => {
      socket.off('data', onData);
      resolve(Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
      if (got >= bytes) done();
    };
    socket.on('data', onData);
    socket.once('end', done);
    socket.once('error', reject);
  });
}

describe('the internal channel between nodes', () => {
  const peers = new ChannelPeers();
  /** Node b's dialer: its own engine holds no host, so anything it reaches came through a's channel. */
  const ownRuntime = new MemoryRuntime();
  const dialer = new HostDialer({
    runtime: ownRuntime,
    isLocal: (node) => node === 'b',
    channel: peers.clientAs('b'),
  });
  before(() => peers.start());
  after(() => peers.close());

  it("relays a host's service to another node, with the bytes the service sent first", async () => {
    const host = peers.addHost('a');
    const socket = await dialer.open({ id: host, node: 'a' }, 'ssh');
    try {
      const greeting = (await receive(socket, 8)).toString();
      assert.match(greeting, /^hello \d+\n$/);
      socket.write('ping\n');
      assert.equal((await receive(socket, 5)).toString(), 'ping\n');
      assert.equal((socket as TLSSocket).getCipher().name, 'ECDHE-PSK-CHACHA20-POLY1305');
      assert.deepEqual(ownRuntime.calls, [], "b's own engine was never asked");
    } finally {
      socket.destroy();
    }
  });

  it('carries a transfer larger than every buffer both ways intact', async () => {
    const host = peers.addHost('a');
    const socket = await dialer.open({ id: host, node: 'a' }, 'desktop');
    try {
      const greeting = (await receive(socket, 8)).length;
      const payload = randomBytes(24 * 1024 * 1024);
      const echoed = receive(socket, payload.length);
      socket.end(payload);
      const back = await echoed;
      assert.ok(greeting > 0);
      assert.equal(back.length, payload.length);
      assert.equal(
        createHash('sha256').update(back).digest('hex'),
        createHash('sha256').update(payload).digest('hex'),
      );
    } finally {
      socket.destroy();
    }
  });

  it('ends the service’s connection when the other node’s side goes, and the reverse', async () => {
    const host = peers.addHost('a');
    const first = await dialer.open({ id: host, node: 'a' }, 'ssh');
    await receive(first, 8);
    const served = peers.service.sockets.at(-1)!;
    first.destroy();
    await until('the service connection to close', () => served.destroyed, 5_000);

    const second = await dialer.open({ id: host, node: 'a' }, 'ssh');
    await receive(second, 8);
    const closed = new Promise((resolve) => second.once('close', resolve));
    peers.service.sockets.at(-1)!.destroy();
    await closed;
  });

  it("runs the desktop's control program on the host's node, with the engine's failures as they were", async () => {
    const host = peers.addHost('a');
    const result = await dialer.exec(
      { id: host, node: 'a' },
      ['/usr/local/sbin/ccp-desktop', 'status'],
      5_000,
    );
    assert.equal(result?.exitCode, 0);
    assert.equal(JSON.parse(result!.stdout).status, 'running');
    assert.ok(peers.runtime.calls.includes(`exec ${host} /usr/local/sbin/ccp-desktop status`));
    assert.equal(ownRuntime.calls.length, 0);

    const stopped = peers.addHost('a', 'stopped');
    assert.equal(
      await dialer.exec({ id: stopped, node: 'a' }, ['/usr/local/sbin/ccp-desktop', 'status'], 5_000),
      null,
      'a host that is not running has no workspace to run in, as on its own node',
    );

    const exec = peers.runtime.exec;
    peers.runtime.exec = async () => {
      throw new RuntimeError('exec_timeout', 'the command ran longer than 5 s');
    };
    try {
      await assert.rejects(
        dialer.exec({ id: host, node: 'a' }, ['/usr/local/sbin/ccp-desktop', 'restart'], 5_000),
        (error: unknown) => error instanceof RuntimeError && error.code === 'exec_timeout',
      );
    } finally {
      peers.runtime.exec = exec;
    }
  });

  it('tells which node does not answer, for a node that is not registered or is down', async () => {
    const host = peers.addHost('a');
    await assert.rejects(
      dialer.open({ id: host, node: 'c' }, 'ssh'),
      (error: unknown) =>
        error instanceof HostUnreachable &&
        error.reason === 'node_unreachable' &&
        error.message === 'The host runs on node c, which does not answer this gateway',
    );
    const down = new ChannelPeers();
    const unanswered = new HostDialer({
      runtime: ownRuntime,
      isLocal: (node) => node === 'b',
      channel: down.clientAs('b'),
    });
    down.address = '127.0.0.1:1'; // nothing listens there
    await assert.rejects(
      unanswered.open({ id: host, node: 'a' }, 'desktop'),
      (error: unknown) => error instanceof HostUnreachable && error.reason === 'node_unreachable',
    );
  });

  it('says the host has no path when its node has none (not running there)', async () => {
    const stopped = peers.addHost('a', 'stopped');
    await assert.rejects(
      dialer.open({ id: stopped, node: 'a' }, 'desktop'),
      (error: unknown) =>
        error instanceof HostUnreachable &&
        error.reason === 'no_path' &&
        error.message === 'The host has no path to its desktop on its node a',
    );
  });
});
