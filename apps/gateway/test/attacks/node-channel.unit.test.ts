import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import tls from 'node:tls';
import { CHANNEL_TLS, nodeChannelKey } from '../../src/cluster/node-channel.js';
import type { ChannelError } from '../../src/cluster/node-channel-client.js';
import { NodeChannelServer } from '../../src/cluster/node-channel-server.js';
import { SecretBox } from '../../src/domain/access/secret-box.js';
import { ChannelPeers } from '../helpers/node-channel-peers.js';

/**
 * Opens a raw PSK connection as `identity` with `key`, sends `request`, and returns all the server said until
 * it closed the connection (or 3 s passed: a connection still open then is cut, and counts as not refused).
 */
function rawExchange(
  address: string,
  identity: string,
  key: Buffer,
  request: string | null,
): Promise<{ said: string; error: string | null; ms: number }> {
  const [host, port] = address.split(':');
  const began = Date.now();
  return new Promise((resolve) => {
    let said = '';
    let error: string | null = null;
    const socket = tls.connect({
      host,
      port: Number(port),
      ...CHANNEL_TLS,
      pskCallback: () => ({ psk: key, identity }),
      checkServerIdentity: () => undefined,
    });
    socket.on('secureConnect', () => {
      if (request !== null) socket.write(request);
    });
    socket.on('data', (chunk: Buffer) => {
      said += chunk.toString();
    });
    socket.on('error', (failure: NodeJS.ErrnoException) => {
      error = failure.code ?? failure.message;
    });
    const cut = setTimeout(() => socket.destroy(), 3_000);
    socket.on('close', () => {
      clearTimeout(cut);
      resolve({ said, error, ms: Date.now() - began });
    });
  });
}

/** The refusal code a node answered with. */
const codeOf = (said: string) => (JSON.parse(said.split('\n')[0]!) as { code?: string }).code;

describe('attack: using a node’s internal channel without being a node', () => {
  const peers = new ChannelPeers(500);
  const request = (host: string, service = 'ssh') => `${JSON.stringify({ host, service })}\n`;
  let host: string;
  before(async () => {
    await peers.start();
    host = peers.addHost('a');
  });
  after(() => peers.close());

  /** Every refusal below must leave the workspace's service untouched. */
  let dialled = 0;
  beforeEach(() => {
    dialled = peers.service.sockets.length;
  });
  const untouched = () =>
    assert.equal(peers.service.sockets.length, dialled, 'the service was never dialled');

  it('the right key of a registered node is served (the baseline the refusals below differ from)', async () => {
    const served = await peers.clientAs('b').request('a', { host, service: 'ssh' }, 2_000);
    served.socket.destroy();
    assert.equal(peers.service.sockets.length, dialled + 1);
  });

  it('refuses a key from another secrets.key at the handshake', async () => {
    const foreign = SecretBox.fromKey(randomBytes(32));
    const result = await rawExchange(peers.address, 'b', nodeChannelKey(foreign, 'b'), request(host));
    assert.equal(result.said, '');
    assert.ok(result.error, 'the handshake failed');
    untouched();
  });

  it('refuses one node’s key presented under another node’s name', async () => {
    const result = await rawExchange(peers.address, 'b', nodeChannelKey(peers.box, 'a'), request(host));
    assert.equal(result.said, '');
    untouched();
  });

  it('refuses an identity that is not a registered node, even with the key derived for it', async () => {
    const result = await rawExchange(
      peers.address,
      'ghost',
      nodeChannelKey(peers.box, 'ghost'),
      request(host),
    );
    assert.equal(codeOf(result.said), 'unknown_node');
    untouched();
  });

  it('refuses a client that speaks plaintext', async () => {
    const [address, port] = peers.address.split(':');
    const said = await new Promise<string>((resolve) => {
      let text = '';
      const socket = net.connect(Number(port), address, () => socket.write(request(host)));
      socket.on('data', (chunk) => {
        text += chunk.toString('latin1');
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve(text));
    });
    assert.ok(!said.includes('"ok"'), `no answer of the protocol in cleartext: ${JSON.stringify(said)}`);
    untouched();
  });

  it('cuts a connection that never finishes its handshake', { timeout: 5_000 }, async () => {
    const [address, port] = peers.address.split(':');
    const began = Date.now();
    await new Promise<void>((resolve) => {
      const socket = net.connect(Number(port), address);
      socket.on('error', () => {});
      socket.on('close', () => resolve());
    });
    assert.ok(Date.now() - began < 3_000, 'closed after the handshake time, not left open');
  });

  it('refuses an oversized request line', async () => {
    const result = await rawExchange(
      peers.address,
      'b',
      nodeChannelKey(peers.box, 'b'),
      'x'.repeat(64 * 1024),
    );
    assert.equal(codeOf(result.said), 'bad_request');
    untouched();
  });

  it('cuts a node that sends no request in time', async () => {
    const result = await rawExchange(peers.address, 'b', nodeChannelKey(peers.box, 'b'), null);
    assert.equal(codeOf(result.said), 'bad_request');
    assert.ok(result.ms < 3_000, `closed after ${result.ms} ms`);
    untouched();
  });

  it('refuses a request that is not one of the protocol', async () => {
    for (const line of ['{"host":"x","service":"shell"}\n', 'GET / HTTP/1.1\n', '[]\n']) {
      const result = await rawExchange(peers.address, 'b', nodeChannelKey(peers.box, 'b'), line);
      assert.equal(codeOf(result.said), 'bad_request', line);
    }
    untouched();
  });

  it('refuses a host it does not hold: unknown, placed on another node, or not running', async () => {
    const client = peers.clientAs('b');
    const refused = async (hostId: string) =>
      client.request('a', { host: hostId, service: 'desktop' }, 2_000).then(
        () => 'served',
        (error: ChannelError) => error.code,
      );
    assert.equal(await refused('no-such-host'), 'unknown_host');
    // Placed elsewhere, though a's engine has a container by that id: never relayed to another node's host.
    const elsewhere = peers.addHost('c');
    peers.runtime.hosts.set(elsewhere, peers.runtime.hosts.get(host)!);
    assert.equal(await refused(elsewhere), 'not_here');
    assert.equal(await refused(peers.addHost('a', 'stopped')), 'host_not_running');
    untouched();
  });

  it('runs no command but the desktop’s controls', async () => {
    const client = peers.clientAs('b');
    const before = peers.runtime.calls.length;
    for (const command of [
      ['sh', '-c', 'id'],
      ['/usr/local/sbin/ccp-desktop', 'status', '--extra'],
    ]) {
      const code = await client
        .request('a', { host, service: 'exec', command, timeout_ms: 1_000 }, 2_000)
        .then(
          () => 'served',
          (error: ChannelError) => error.code,
        );
      assert.equal(code, 'not_allowed', command.join(' '));
    }
    assert.equal(peers.runtime.calls.length, before, 'the engine was never asked');
  });

  it('a client does not talk to a server that is not the node it meant, whatever key it holds', async () => {
    const impostor = new NodeChannelServer({
      bind: { host: '127.0.0.1', port: 0 },
      self: 'c',
      keyOf: (name) => nodeChannelKey(peers.box, name),
      isNode: async () => true,
      findHost: async () => ({ node: 'c', status: 'running' }),
      local: {
        open: async () => assert.fail('the impostor was asked for a service'),
        exec: async () => assert.fail('the impostor was asked to run a command'),
      },
      execAllowed: () => true,
      log: (await import('pino')).default({ level: 'silent' }),
    });
    await impostor.listen();
    try {
      const address = peers.address;
      peers.address = `127.0.0.1:${impostor.port}`; // a's registered address now leads to node c
      const code = await peers
        .clientAs('b')
        .request('a', { host, service: 'ssh' }, 2_000)
        .then(
          () => 'served',
          (error: ChannelError) => error.code,
        );
      peers.address = address;
      assert.equal(code, 'node_unreachable');
    } finally {
      await impostor.close();
    }
  });
});
