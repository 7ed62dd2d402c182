import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import net, { type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import ssh2, { type ClientChannel, type ServerChannel } from 'ssh2';
import { generateEd25519 } from '../../src/domain/users/ssh-public-key.js';
import { PaddingPool, reusePacketBuffers, socketOf } from '../../src/ssh/ssh2-internals.js';

const BULK_BYTES = 4096;
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** What a socket wrote in bulk packets: how many, and in how many distinct buffers. */
function countBulkWrites(socket: net.Socket): { writes: number; buffers: Set<ArrayBufferLike> } {
  const seen = { writes: 0, buffers: new Set<ArrayBufferLike>() };
  const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
  socket.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (Buffer.isBuffer(chunk) && chunk.length >= BULK_BYTES) {
      seen.writes += 1;
      seen.buffers.add(chunk.buffer);
    }
    return write(chunk, ...rest);
  }) as typeof socket.write;
  return seen;
}

/**
 * An ssh2 server that echoes each exec channel's input, and a client sending `data` through it, with a key
 * exchange under way; both ends reuse their packet buffers. Answers what came back and what each socket wrote.
 */
async function echoThrough(cipher: string, data: Buffer) {
  const { privateKey } = generateEd25519('packet-buffer-reuse test');
  let serverWrites: ReturnType<typeof countBulkWrites> | null = null;
  const server = new ssh2.Server(
    { hostKeys: [privateKey], algorithms: { cipher: [cipher as ssh2.CipherAlgorithm] } },
    (connection) => {
      const socket = socketOf(connection);
      assert.ok(socket);
      serverWrites = countBulkWrites(socket);
      reusePacketBuffers(connection, socket);
      connection.on('authentication', (ctx) => ctx.accept());
      connection.on('session', (accept) =>
        accept().on('exec', (acceptExec) => {
          const channel: ServerChannel = acceptExec();
          channel.pipe(channel);
          // A new key exchange mid-transfer: ssh2 queues packets meanwhile, then makes new ciphers on both ends.
          channel.once('data', () => connection.rekey());
        }),
      );
      connection.on('error', () => {});
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const sock = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  const clientWrites = countBulkWrites(sock);
  const client = new ssh2.Client();
  let handshakes = 0;
  client.on('handshake', () => {
    handshakes += 1;
  });
  try {
    const echoed = await new Promise<Buffer>((resolve, reject) => {
      client.on('error', reject);
      client.on('ready', () => {
        client.exec('echo', (error, channel: ClientChannel) => {
          if (error) return reject(error);
          const chunks: Buffer[] = [];
          let received = 0;
          channel.on('data', (chunk: Buffer) => {
            chunks.push(Buffer.from(chunk));
            received += chunk.length;
            if (received >= data.length) resolve(Buffer.concat(chunks));
          });
          channel.write(data);
        });
      });
      client.connect({
        sock,
        username: 'test',
        algorithms: { cipher: [cipher as ssh2.CipherAlgorithm] },
        hostVerifier: () => true,
      });
      reusePacketBuffers(client, sock);
    });
    assert.ok(serverWrites);
    return {
      echoed,
      handshakes,
      clientWrites,
      serverWrites: serverWrites as ReturnType<typeof countBulkWrites>,
    };
  } finally {
    client.end();
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('SSH packet buffers reused per connection', () => {
  for (const cipher of ['aes128-gcm@openssh.com', 'chacha20-poly1305@openssh.com']) {
    it(`with ${cipher}: every byte arrives intact both ways, across a rekey, in a few buffers rather than one per packet`, async () => {
      const data = randomBytes(8 * 2 ** 20);
      const { echoed, handshakes, clientWrites, serverWrites } = await echoThrough(cipher, data);
      assert.equal(handshakes, 2, 'the first key exchange and the one mid-transfer');
      assert.equal(echoed.length, data.length);
      assert.equal(sha256(echoed), sha256(data));
      for (const [side, seen] of [
        ['client', clientWrites],
        ['server', serverWrites],
      ] as const) {
        // 8 MiB is 256 full packets each way; a buffer is new only when a write had to wait in the socket.
        assert.ok(seen.writes >= 200, `${side}: ${seen.writes} bulk packets written`);
        assert.ok(
          seen.buffers.size < seen.writes / 4,
          `${side}: ${seen.writes} bulk packets in ${seen.buffers.size} buffers`,
        );
      }
    });
  }
});

describe('SSH packet padding from a pool of random bytes', () => {
  it('hands out each random byte once, across refills of the pool', () => {
    const pool = new PaddingPool();
    const seen = new Set<string>();
    // 19 bytes, the most an AES-GCM packet's padding takes: 10,000 of them draw the 64 KiB pool three times over.
    for (let i = 0; i < 10_000; i++) {
      const packet = Buffer.alloc(32);
      pool.fill(packet, 5, 19);
      assert.equal(packet.subarray(0, 5).toString('hex'), '0000000000', 'nothing written before the offset');
      assert.equal(packet.subarray(24).toString('hex'), '00'.repeat(8), 'nothing written after the padding');
      seen.add(packet.subarray(5, 24).toString('hex'));
    }
    assert.equal(seen.size, 10_000, 'no padding repeated');
  });
});
