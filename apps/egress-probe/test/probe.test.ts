import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as packet from 'dns-packet';
import { needs } from '../../../test/support/needs.js';
import { ConfigError, DnsLog, parseProbeConfig, type RunningProbe, startProbe } from '../src/index.js';

const ZONE = 'probe.test';
const ANSWER = '203.0.113.10';
const TOKEN = 'log-secret';

let probe: RunningProbe;
let scratch: string;
let ca: string;

const random = () => randomBytes(8).toString('hex');
const httpUrl = (path: string) => `http://127.0.0.1:${probe.ports.http}${path}`;

async function dnsLog(name: string): Promise<Array<{ address: string; transport: string; type: string }>> {
  const res = await fetch(httpUrl(`/dns-log?name=${encodeURIComponent(name)}`), {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as {
    name: string;
    queries: Array<{ address: string; transport: string; type: string }>;
  };
  return body.queries;
}

function firstData(response: packet.Packet): unknown {
  const answer = response.answers?.[0];
  assert.ok(answer && 'data' in answer, 'the response has an answer');
  return answer.data;
}

function resolver(): Resolver {
  const r = new Resolver({ timeout: 2000, tries: 1 });
  r.setServers([`127.0.0.1:${probe.ports.dns}`]);
  return r;
}

async function tcpQuery(queries: packet.Packet[]): Promise<packet.Packet[]> {
  const socket = net.connect(probe.ports.dns!, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(Buffer.concat(queries.map((q) => packet.streamEncode(q))));
  let buffer = Buffer.alloc(0);
  const answers: packet.Packet[] = [];
  for await (const chunk of socket) {
    buffer = Buffer.concat([buffer, chunk as Buffer]);
    while (buffer.length >= 2 && buffer.length >= 2 + buffer.readUInt16BE(0)) {
      answers.push(packet.streamDecode(buffer));
      buffer = buffer.subarray(2 + buffer.readUInt16BE(0));
    }
    if (answers.length === queries.length) break;
  }
  socket.destroy();
  return answers;
}

async function udpRaw(message: Buffer, waitMs: number): Promise<Buffer | undefined> {
  const socket = dgram.createSocket('udp4');
  try {
    const reply = once(socket, 'message').then(([data]) => data as Buffer);
    socket.send(message, probe.ports.dns!, '127.0.0.1');
    const timeout = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), waitMs));
    return await Promise.race([reply, timeout]);
  } finally {
    socket.close();
  }
}

function httpsRequest(
  path: string,
  init: { method?: string; body?: Buffer; headers?: Record<string, string> } = {},
) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>(
    (resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port: probe.ports.https,
          path,
          ca,
          method: init.method ?? 'GET',
          headers: init.headers,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
          );
        },
      );
      req.on('error', reject);
      req.end(init.body);
    },
  );
}

// The probe's TLS certificate is made with openssl; without it every suite here is skipped.
const skip = needs('openssl');

before(async () => {
  if (skip) return;
  scratch = mkdtempSync(join(tmpdir(), 'ccp-probe-test-'));
  const cert = join(scratch, 'cert.pem');
  const key = join(scratch, 'key.pem');
  const request = 'req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=probe.test';
  const san = ['-addext', 'subjectAltName=IP:127.0.0.1'];
  execFileSync('openssl', [...request.split(' '), ...san, '-keyout', key, '-out', cert], { stdio: 'ignore' });
  ca = readFileSync(cert, 'utf8');
  const config = parseProbeConfig(
    ['--http', '127.0.0.1:0', '--https', '127.0.0.1:0', '--dns', '127.0.0.1:0', '--zone', `${ZONE}.`],
    {
      PROBE_ANSWER: ANSWER,
      PROBE_LOG_TOKEN: TOKEN,
      PROBE_TLS_CERT: cert,
      PROBE_TLS_KEY: key,
      PROBE_MAX_BYTES: '1000000',
    },
  );
  assert.ok(config);
  probe = await startProbe(config);
});

after(async () => {
  await probe?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('HTTP', { skip }, () => {
  test('echoes the caller address as text and JSON', async () => {
    for (const path of ['/', '/ip']) {
      const res = await fetch(httpUrl(path));
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '127.0.0.1');
    }
    const json = await fetch(httpUrl('/ip.json'));
    assert.deepEqual(await json.json(), { ip: '127.0.0.1' });
  });

  test('sends n bytes with a Content-Length', async () => {
    const res = await fetch(httpUrl('/bytes/300000'));
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-length'), '300000');
    assert.equal((await res.arrayBuffer()).byteLength, 300000);
    assert.equal((await fetch(httpUrl('/bytes/0'))).headers.get('content-length'), '0');
    assert.equal((await fetch(httpUrl('/bytes/nope'))).status, 400);
    assert.equal((await fetch(httpUrl('/bytes/1000001'))).status, 413);
  });

  test('unknown paths and methods are refused', async () => {
    assert.equal((await fetch(httpUrl('/nothing'))).status, 404);
    assert.equal((await fetch(httpUrl('/ip'), { method: 'POST' })).status, 405);
  });

  test('the DNS log needs the token', async () => {
    assert.equal((await fetch(httpUrl('/dns-log?name=a.probe.test'))).status, 401);
    const wrong = await fetch(httpUrl('/dns-log?name=a.probe.test'), {
      headers: { authorization: 'Bearer no' },
    });
    assert.equal(wrong.status, 401);
    assert.equal((await fetch(httpUrl(`/dns-log?name=a.probe.test&token=${TOKEN}`))).status, 200);
    const missing = await fetch(httpUrl('/dns-log'), { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(missing.status, 400);
  });
});

describe('DNS over UDP', { skip }, () => {
  test('answers any name in the zone with the configured address, and logs the querier', async () => {
    const name = `${random()}.leak.${ZONE}`;
    assert.deepEqual(await resolver().resolve4(name), [ANSWER]);
    assert.deepEqual(await resolver().resolve4(ZONE), [ANSWER]);
    const log = await dnsLog(`${name.toUpperCase()}.`);
    assert.equal(log.length, 1);
    assert.deepEqual(
      { ...log[0], at: undefined },
      { address: '127.0.0.1', transport: 'udp', type: 'A', at: undefined },
    );
  });

  test('whoami names answer the querier address as A and TXT', async () => {
    assert.deepEqual(await resolver().resolve4(`whoami.${ZONE}`), ['127.0.0.1']);
    assert.deepEqual(await resolver().resolveTxt(`whoami.${random()}.${ZONE}`), [['127.0.0.1']]);
  });

  test('no AAAA for an IPv4 answer, SOA and NS at the apex, REFUSED outside the zone', async () => {
    await assert.rejects(resolver().resolve6(`x.${ZONE}`), { code: 'ENODATA' });
    const soa = await resolver().resolveSoa(ZONE);
    assert.equal(soa.nsname, `ns.${ZONE}`);
    assert.deepEqual(await resolver().resolveNs(ZONE), [`ns.${ZONE}`]);
    await assert.rejects(resolver().resolve4('example.com'), { code: 'EREFUSED' });
    const outside = `${random()}.example.com`;
    await assert.rejects(resolver().resolve4(outside));
    assert.equal((await dnsLog(outside)).length, 1, 'queries outside the zone are logged too');
  });

  test('malformed input gets FORMERR, or nothing when there is no header', async () => {
    const reply = await udpRaw(Buffer.from([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xff]), 2000);
    assert.ok(reply);
    const decoded = packet.decode(reply);
    assert.equal(decoded.id, 0x1234);
    assert.equal((decoded as { rcode?: string }).rcode, 'FORMERR');
    assert.equal(await udpRaw(Buffer.from([1, 2, 3]), 300), undefined);
  });
});

describe('DNS over TCP', { skip }, () => {
  test('answers several length-prefixed queries on one connection', async () => {
    const a = `${random()}.${ZONE}`;
    const answers = await tcpQuery([
      { type: 'query', id: 1, flags: packet.RECURSION_DESIRED, questions: [{ type: 'A', name: a }] },
      { type: 'query', id: 2, questions: [{ type: 'TXT', name: `whoami.${ZONE}` }] },
    ]);
    assert.equal(answers.length, 2);
    const [first, second] = answers as [packet.DecodedPacket, packet.DecodedPacket];
    assert.equal(first.id, 1);
    assert.ok(first.flag_aa && first.flag_rd);
    assert.deepEqual(
      first.answers?.map((r) => [r.type, (r as packet.StringAnswer).data]),
      [['A', ANSWER]],
    );
    assert.deepEqual(firstData(second), [Buffer.from('127.0.0.1')]);
    assert.deepEqual(
      (await dnsLog(a)).map((e) => e.transport),
      ['tcp'],
    );
  });
});

describe('DNS over HTTPS', { skip }, () => {
  const query = (name: string) => packet.encode({ type: 'query', id: 0, questions: [{ type: 'A', name }] });

  test('POST and GET over HTTP/1.1', async () => {
    const name = `${random()}.${ZONE}`;
    const post = await httpsRequest('/dns-query', {
      method: 'POST',
      body: query(name),
      headers: { 'content-type': 'application/dns-message' },
    });
    assert.equal(post.status, 200);
    assert.equal(post.headers['content-type'], 'application/dns-message');
    assert.equal(firstData(packet.decode(post.body)), ANSWER);
    const get = await httpsRequest(`/dns-query?dns=${query(name).toString('base64url')}`);
    assert.equal(firstData(packet.decode(get.body)), ANSWER);
    assert.deepEqual(
      (await dnsLog(name)).map((e) => e.transport),
      ['doh', 'doh'],
    );
    const wrongType = await httpsRequest('/dns-query', { method: 'POST', body: query(name) });
    assert.equal(wrongType.status, 415);
    assert.equal((await httpsRequest('/dns-query')).status, 400);
  });

  test('POST over HTTP/2', async () => {
    const name = `whoami.${random()}.${ZONE}`;
    const session = http2.connect(`https://127.0.0.1:${probe.ports.https}`, { ca });
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/dns-query',
        'content-type': 'application/dns-message',
      });
      stream.end(query(name));
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      assert.equal(firstData(packet.decode(Buffer.concat(chunks))), '127.0.0.1');
    } finally {
      session.close();
    }
    assert.deepEqual(
      (await dnsLog(name)).map((e) => e.transport),
      ['doh'],
    );
  });

  test('the HTTPS listener serves the IP echo too', async () => {
    assert.equal((await httpsRequest('/ip')).body.toString(), '127.0.0.1');
  });
});

describe('settings', () => {
  test('flags win over the environment, defaults fill the rest', () => {
    const config = parseProbeConfig(['--zone', 'Z.Example', '--dns', '[::1]:5353'], {
      PROBE_ZONE: 'ignored.test',
      PROBE_ANSWER: '2001:db8::1',
      PROBE_HTTP: 'off',
    });
    assert.ok(config);
    assert.equal(config.zone, 'z.example');
    assert.deepEqual(config.dns, { host: '::1', port: 5353 });
    assert.equal(config.http, undefined);
    assert.equal(config.https, undefined, 'no HTTPS without a certificate');
    assert.equal(config.ttl, 0);
    assert.equal(config.logToken, undefined);
    assert.equal(parseProbeConfig(['--help'], {}), undefined);
  });

  test('bad values are reported as configuration errors', () => {
    const env = { PROBE_ZONE: 'probe.test', PROBE_ANSWER: '203.0.113.10' };
    for (const argv of [
      ['--dns', 'localhost:53'],
      ['--http', '0.0.0.0:70000'],
      ['--answer', 'not-an-ip'],
      ['--zone', 'bad zone'],
      ['--ttl', '-1'],
      ['--tls-cert', '/nonexistent'],
      ['--tls-cert', '/nonexistent', '--tls-key', '/nonexistent'],
      ['--http', 'off', '--dns', 'off'],
      ['--unknown'],
    ]) {
      assert.throws(() => parseProbeConfig(argv, env), ConfigError, argv.join(' '));
    }
  });

  test('the DNS log drops the oldest names past its limit', () => {
    const log = new DnsLog(3);
    const entry = { address: '198.51.100.1', transport: 'udp' as const, type: 'A', at: '' };
    log.record('a.test', entry);
    log.record('b.test', entry);
    log.record('b.test', entry);
    log.record('c.test', entry);
    assert.equal(log.lookup('a.test').length, 0);
    assert.equal(log.lookup('B.TEST.').length, 2);
    assert.equal(log.lookup('c.test').length, 1);
  });
});
