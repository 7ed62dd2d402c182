import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import dnsPacket from 'dns-packet';
import { askDoh, decodeReply, readProbeLog, txtText } from '../../src/egress/probe-client.js';

const exec = promisify(execFile);
const LOOPBACK = '127.0.0.1';
const ECHO_NAME = 'echo.probe.test';
const EXIT = '198.51.100.21';

/**
 * The path check's program imports the probe client with plain `node` inside a workspace's namespace, where
 * no tsx is loaded: here plain `node` loads it the same way and asks a local resolver and IP echo through it.
 */
describe('probe client, loaded by plain node as the path check loads it', () => {
  const resolver = dgram.createSocket('udp4');
  let lost = 0;
  const echo = http.createServer((request, response) => {
    response.end(request.headers.host === `${ECHO_NAME}:${port(echo)}` ? `ip=${EXIT}\n` : 'wrong host');
  });
  const port = (server: http.Server) => (server.address() as AddressInfo).port;

  before(async () => {
    resolver.on('message', (message, from) => {
      // The first question is lost, as the tunnel's DoH client sometimes loses one: the client asks again.
      if (lost++ === 0) return;
      const query = dnsPacket.decode(message);
      const reply = dnsPacket.encode({
        id: query.id,
        type: 'response',
        flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
        questions: query.questions,
        answers: [{ type: 'A', name: ECHO_NAME, data: LOOPBACK }],
      });
      resolver.send(reply, from.port, from.address);
    });
    await new Promise<void>((resolve) => resolver.bind(0, LOOPBACK, resolve));
    await new Promise<void>((resolve) => echo.listen(0, LOOPBACK, resolve));
  });

  after(() => {
    resolver.close();
    echo.close();
  });

  it('resolves the echo through the given resolver and reads its answer', async () => {
    const task = {
      client: import.meta.resolve('../../src/egress/probe-client.js'),
      dns: { address: LOOPBACK, port: resolver.address().port },
      url: `http://${ECHO_NAME}:${port(echo)}/trace`,
    };
    const program = `
      const task = JSON.parse(process.argv[1]);
      import(task.client).then(async (client) => {
        const address = await client.resolveIPv4(new URL(task.url).hostname, task.dns, 5000);
        const outcome = await client.getEcho(task.url, address, { trust: { extra: null, pinned: null }, timeoutMs: 5000 });
        process.stdout.write(JSON.stringify({ address, outcome, exit: client.parseEcho(outcome.body) }));
      });`;
    const { stdout } = await exec(process.execPath, ['-e', program, JSON.stringify(task)], {
      env: { PATH: process.env.PATH ?? '' },
    });
    assert.deepEqual(JSON.parse(stdout), {
      address: LOOPBACK,
      outcome: { url: task.url, status: 200, body: `ip=${EXIT}\n` },
      exit: EXIT,
    });
    assert.ok(lost >= 2, 'the lost question was asked again');
  });
});

/** A CA and a certificate for 127.0.0.1 signed by it, and an impostor's self-signed one for the same address. */
async function certificates(dir: string) {
  const openssl = (...args: string[]) => exec('openssl', args, { cwd: dir });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  await openssl(
    'req',
    '-x509',
    ...key,
    '-days',
    '1',
    '-subj',
    '/CN=ca',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
  );
  await openssl('req', ...key, '-subj', '/CN=dns', '-keyout', 'dns.key', '-out', 'dns.csr');
  await openssl(
    'x509',
    '-req',
    '-in',
    'dns.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    path.join(dir, 'san.cnf'),
    '-out',
    'dns.pem',
  );
  await openssl(
    'req',
    '-x509',
    ...key,
    '-days',
    '1',
    '-subj',
    '/CN=impostor',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
    '-keyout',
    'impostor.key',
    '-out',
    'impostor.pem',
  );
  const read = (name: string) => readFileSync(path.join(dir, name), 'utf8');
  return {
    ca: read('ca.pem'),
    genuine: { cert: read('dns.pem'), key: read('dns.key') },
    impostor: { cert: read('impostor.pem'), key: read('impostor.key') },
  };
}

/**
 * The whoami question over DoH and the probe's log: only a server whose certificate chains to the trusted CA
 * gets an answer from us, so nobody on the way can answer in its place (issue 26).
 */
describe('probe client over TLS', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ccp-doh-'));
  const servers: https.Server[] = [];
  let certs: Awaited<ReturnType<typeof certificates>>;

  /** A DoH server answering every question with a TXT of `text`, and a DNS log that needs `token`. */
  async function serve(identity: { cert: string; key: string }, text: string): Promise<string> {
    const server = https.createServer(identity, (request, response) => {
      if (request.url?.startsWith('/dns-log')) {
        const ok = request.headers.authorization === 'Bearer t0ken';
        response.writeHead(ok ? 200 : 401, { 'content-type': 'application/json' });
        return response.end(JSON.stringify({ queries: ok ? [{ address: text }] : [] }));
      }
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const query = dnsPacket.decode(Buffer.concat(chunks));
        const reply = dnsPacket.encode({
          id: query.id,
          type: 'response',
          questions: query.questions,
          answers: [{ type: 'TXT', name: 'whoami.test', class: 'CH', data: [text] }],
        });
        response.writeHead(200, { 'content-type': 'application/dns-message' });
        response.end(reply);
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
    return `https://${LOOPBACK}:${(server.address() as AddressInfo).port}`;
  }

  before(async () => {
    writeFileSync(path.join(dir, 'san.cnf'), 'subjectAltName=IP:127.0.0.1\n');
    certs = await certificates(dir);
  });
  after(() => {
    for (const server of servers) server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const query = () =>
    dnsPacket.encode({
      id: 1,
      type: 'query',
      questions: [{ type: 'TXT', name: 'whoami.test', class: 'CH' }],
    });

  it('asks over DoH a resolver whose certificate chains to the trusted CA, and refuses an impostor', async () => {
    const genuine = await serve(certs.genuine, EXIT);
    const reply = await askDoh(`${genuine}/dns-query`, query(), {
      trust: { extra: certs.ca, pinned: null },
      timeoutMs: 5000,
    });
    const decoded = decodeReply(reply, undefined, 'whoami');
    assert.equal(decoded.ok && txtText(decoded.packet), EXIT);

    const impostor = await serve(certs.impostor, EXIT);
    await assert.rejects(
      askDoh(`${impostor}/dns-query`, query(), { trust: { extra: certs.ca, pinned: null }, timeoutMs: 5000 }),
      /SELF_SIGNED|certificate/i,
    );
  });

  it("reads the probe's log over HTTPS from the pinned CA only, and never over plain HTTP", async () => {
    const genuine = await serve(certs.genuine, EXIT);
    const probe = {
      url: `${genuine}/ip`,
      dnsZone: 'probe.test',
      dohUrl: genuine,
      token: 't0ken',
      caFile: null,
    };
    const trust = { extra: null, pinned: certs.ca };
    assert.deepEqual(await readProbeLog(probe, 'n.probe.test', { trust, timeoutMs: 5000 }), [EXIT]);

    const impostor = await serve(certs.impostor, EXIT);
    await assert.rejects(
      readProbeLog({ ...probe, url: `${impostor}/ip` }, 'n.probe.test', { trust, timeoutMs: 5000 }),
      /cannot read the probe's DNS log: .*SELF_SIGNED|certificate/i,
    );
    await assert.rejects(
      readProbeLog({ ...probe, url: 'http://127.0.0.1:9/ip' }, 'n.probe.test', { trust, timeoutMs: 5000 }),
      /read over HTTPS only/,
    );
  });
});
