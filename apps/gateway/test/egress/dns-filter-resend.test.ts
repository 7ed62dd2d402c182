import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const FILTER = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../../../image/egress-gateway/rootfs/usr/local/libexec/ccp/dns-filter',
);

/** A DNS question for `name` (type A) with message ID `id`. */
function question(id: number, name: string): Buffer {
  const labels = name
    .split('.')
    .map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label)]));
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x0100, 2);
  header.writeUInt16BE(1, 4);
  return Buffer.concat([header, ...labels, Buffer.from([0, 0, 1, 0, 1])]);
}

const nameOf = (message: Buffer) => {
  const labels: string[] = [];
  let offset = 12;
  while (message[offset]) {
    labels.push(message.subarray(offset + 1, offset + 1 + message[offset]!).toString());
    offset += 1 + message[offset]!;
  }
  return labels.join('.');
};

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });

// The workspace's resolver asks the egress gateway's DNS filter, which asks v2ray. v2ray's DNS-over-HTTPS client
// now and then drops a question without answering it; the filter passes a question left unanswered on once more,
// so the workspace gets its answer without waiting out its resolver's timeout of a second.
describe('the DNS filter passes a question v2ray left unanswered on once more', () => {
  let filter: ChildProcess;
  let upstream: dgram.Socket;
  let listenPort: number;
  /** Each name's copies that reached the stand-in for v2ray. */
  const heard = new Map<string, number>();

  before(async () => {
    upstream = dgram.createSocket('udp4');
    // Answers every name's second copy, and its first too unless the name starts with "dropped".
    upstream.on('message', (message, from) => {
      const name = nameOf(message);
      const copies = (heard.get(name) ?? 0) + 1;
      heard.set(name, copies);
      if (name.startsWith('dropped') && copies === 1) return;
      const answer = Buffer.from(message);
      answer.writeUInt16BE(0x8180, 2);
      upstream.send(answer, from.port, from.address);
    });
    await new Promise<void>((resolve) => upstream.bind(0, '127.0.0.1', resolve));
    listenPort = await freePort();
    filter = spawn('perl', [FILTER, '-', `127.0.0.1:${listenPort}`, `127.0.0.1:${upstream.address().port}`], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    filter.stdin!.end('refuse refused.test\n');
    await new Promise<void>((resolve, reject) => {
      filter.stdout!.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('listening')) resolve();
      });
      filter.once('exit', (code) => reject(new Error(`the filter exited with ${code}`)));
    });
  });
  after(() => {
    filter?.kill();
    upstream?.close();
  });

  /** Asks once (no asking again, unlike a resolver) and waits up to 5 s for the answer. */
  const ask = (id: number, name: string) =>
    new Promise<Buffer>((resolve, reject) => {
      const client = dgram.createSocket('udp4');
      const timer = setTimeout(() => {
        client.close();
        reject(new Error(`no answer for ${name} within 5 s`));
      }, 5000);
      client.on('message', (answer) => {
        clearTimeout(timer);
        client.close();
        resolve(answer);
      });
      client.send(question(id, name), listenPort, '127.0.0.1');
    });

  it('answers a question whose first copy v2ray dropped, having passed it on twice', async () => {
    const answer = await ask(0x1234, 'dropped.example.test');
    assert.equal(answer.readUInt16BE(0), 0x1234);
    assert.equal(answer.readUInt16BE(2) & 0x8000, 0x8000, 'an answer');
    assert.equal(heard.get('dropped.example.test'), 2);
  });

  it('passes an answered question on once, and refuses a refused name without asking', async () => {
    const answer = await ask(0x4321, 'answered.example.test');
    assert.equal(answer.readUInt16BE(0), 0x4321);
    const refusal = await ask(0x5555, 'refused.test');
    assert.equal(refusal.readUInt16BE(2) & 0x000f, 5, 'REFUSED');
    // Longer than the filter waits before passing a question on again.
    await new Promise((resolve) => setTimeout(resolve, 700));
    assert.equal(heard.get('answered.example.test'), 1);
    assert.equal(heard.get('refused.test'), undefined);
  });
});
