/**
 * The lab's stand-ins for the public services the gateway verifies with by default (docs/egress-probe.md), at
 * documentation addresses inside the lab's "internet" namespace. lab.sh starts this as a daemon:
 *
 *   - resolver (stands in for 1.1.1.1): DNS over UDP and TCP, DoH (RFC 8484, GET and POST), `/cdn-cgi/trace`.
 *     It answers the public zone from a table, asks the probe's authoritative server for names under the probe's
 *     zone (as a recursive resolver would), answers `whoami.cloudflare` TXT (class CH or IN) with the asker's
 *     address, and NXDOMAIN otherwise. Every question is logged: `GET http://<resolver>/query-log?name=` with the
 *     bearer token.
 *   - checkip (stands in for checkip.amazonaws.com): `GET /` answers `<caller address>\n`, HTTP and HTTPS.
 *   - web: `www.<zone>`, a page at `/` and the caller's address at `/ip`, HTTP and HTTPS.
 *
 * Settings come as one JSON argument (lab.sh writes it); the TLS certificate covers every name and address here.
 */
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import dnsPacket from 'dns-packet';

interface Settings {
  resolver: string;
  checkip: string;
  web: string;
  zone: string;
  probeZone: string;
  probeDns: { address: string; port: number };
  whoamiName: string;
  cert: string;
  key: string;
  logToken: string;
}

const settings = JSON.parse(process.argv[2] ?? '{}') as Settings;
const tls = { cert: readFileSync(settings.cert), key: readFileSync(settings.key) };
// A records only (other types get an empty answer): an exit that dials a name itself then always arrives over
// IPv4, so the sites see the exit's IPv4 address, as the README's demo says.
const addresses = new Map<string, string>([
  [`www.${settings.zone}`, settings.web],
  [`checkip.${settings.zone}`, settings.checkip],
]);

type Transport = 'udp' | 'tcp' | 'doh';
const log = new Map<string, { address: string; transport: Transport; type: string; at: string }[]>();
const plain = (address: string | undefined) => (address ?? 'unknown').replace(/^::ffff:/, '');
const within = (name: string, zone: string) => name === zone || name.endsWith(`.${zone}`);

/** Relays a question about the probe's zone to its authoritative server, as a recursive resolver would. */
function askProbe(query: Buffer): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const socket = dgram.createSocket('udp4');
    const timer = setTimeout(() => done(null), 3000);
    function done(reply: Buffer | null) {
      clearTimeout(timer);
      socket.close();
      resolve(reply);
    }
    socket.on('message', (message) => done(message));
    socket.on('error', () => done(null));
    // From the resolver's own address, so the probe's log shows who asked it: the resolver, as in the wild.
    socket.bind(0, settings.resolver, () =>
      socket.send(query, settings.probeDns.port, settings.probeDns.address),
    );
  });
}

async function answer(query: Buffer, asker: string, transport: Transport): Promise<Buffer> {
  const packet = dnsPacket.decode(query);
  const question = packet.questions?.[0];
  const reply = (flags: number, answers: dnsPacket.Answer[] = []) =>
    dnsPacket.encode({
      id: packet.id,
      type: 'response',
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | flags,
      questions: packet.questions,
      answers,
    });
  if (!question) return reply(1); // FORMERR
  const name = question.name.toLowerCase().replace(/\.$/, '');
  const entries = log.get(name) ?? [];
  entries.push({ address: asker, transport, type: question.type, at: new Date().toISOString() });
  log.set(name, entries);

  if (name === settings.whoamiName && question.type === 'TXT') {
    return reply(0, [
      { type: 'TXT', name: question.name, class: question.class ?? 'IN', ttl: 0, data: [asker] },
    ]);
  }
  if (within(name, settings.probeZone)) {
    const relayed = await askProbe(dnsPacket.encode({ ...packet, id: packet.id }));
    return relayed ?? reply(2); // SERVFAIL when the authoritative server is silent
  }
  const address = addresses.get(name);
  if (address !== undefined) {
    return reply(
      0,
      question.type === 'A' ? [{ type: 'A', name: question.name, ttl: 60, data: address }] : [],
    );
  }
  return reply(3); // NXDOMAIN
}

// ------------------------------------------------------------------------------------------ DNS, UDP and TCP
const udp = dgram.createSocket('udp4');
udp.on('message', (message, remote) => {
  answer(message, plain(remote.address), 'udp').then(
    (reply) => udp.send(reply, remote.port, remote.address),
    () => {},
  );
});
udp.bind(53, settings.resolver);

net
  .createServer((socket) => {
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const length = buffered.readUInt16BE(0);
        const query = buffered.subarray(2, 2 + length);
        buffered = buffered.subarray(2 + length);
        answer(query, plain(socket.remoteAddress), 'tcp').then(
          (reply) => {
            const framed = Buffer.alloc(2 + reply.length);
            framed.writeUInt16BE(reply.length, 0);
            reply.copy(framed, 2);
            if (!socket.destroyed) socket.write(framed);
          },
          () => socket.destroy(),
        );
      }
    });
    socket.on('error', () => {});
  })
  .listen(53, settings.resolver);

// ------------------------------------------------------------------------------------------------------ HTTP
// HTTPS speaks HTTP/2 as well as HTTP/1.1, as public DoH resolvers do (`dig +https` asks over HTTP/2 only).
type Request = http.IncomingMessage | http2.Http2ServerRequest;
/** What the handlers use of either version's response. */
interface Response {
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  end(body: string | Buffer): unknown;
}
type Handler = (request: Request, response: Response, secure: boolean) => void;

const text = (response: Response, status: number, body: string, type = 'text/plain') => {
  response.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  response.end(body);
};

function trace(request: Request, response: Response, secure: boolean): void {
  const lines = [
    'fl=ccp-lab',
    `h=${request.headers.host ?? settings.resolver}`,
    `ip=${plain(request.socket.remoteAddress)}`,
    `ts=${(Date.now() / 1000).toFixed(3)}`,
    `visit_scheme=${secure ? 'https' : 'http'}`,
    `uag=${request.headers['user-agent'] ?? ''}`,
    'colo=LAB',
    `http=http/${request.httpVersion}`,
    'loc=ZZ',
    `tls=${secure ? 'TLSv1.3' : 'off'}`,
    'sni=off',
    'warp=off',
  ];
  text(response, 200, `${lines.join('\n')}\n`);
}

const resolverSite: Handler = (request, response, secure) => {
  const url = new URL(request.url ?? '/', 'http://lab');
  if (url.pathname === '/cdn-cgi/trace') return trace(request, response, secure);
  if (url.pathname === '/query-log' && !secure) {
    if (request.headers.authorization !== `Bearer ${settings.logToken}`)
      return text(response, 401, 'token\n');
    const name = (url.searchParams.get('name') ?? '').toLowerCase().replace(/\.$/, '');
    return text(response, 200, JSON.stringify({ queries: log.get(name) ?? [] }), 'application/json');
  }
  if (url.pathname === '/dns-query' && secure) {
    const asker = plain(request.socket.remoteAddress);
    const respond = (query: Buffer) =>
      answer(query, asker, 'doh').then(
        (reply) => {
          response.writeHead(200, {
            'content-type': 'application/dns-message',
            'content-length': reply.length,
          });
          response.end(reply);
        },
        () => text(response, 400, 'not a DNS message\n'),
      );
    if (request.method === 'GET') {
      const encoded = url.searchParams.get('dns');
      if (!encoded) return text(response, 400, 'dns parameter missing\n');
      void respond(Buffer.from(encoded, 'base64url'));
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => void respond(Buffer.concat(chunks)));
    return;
  }
  text(response, 404, 'not found\n');
};

const checkipSite: Handler = (request, response) =>
  (request.url ?? '/') === '/'
    ? text(response, 200, `${plain(request.socket.remoteAddress)}\n`)
    : text(response, 404, 'not found\n');

const webSite: Handler = (request, response) => {
  const path = new URL(request.url ?? '/', 'http://lab').pathname;
  if (path === '/') return text(response, 200, 'ccp-lab public web\n', 'text/html');
  if (path === '/ip') return text(response, 200, `${plain(request.socket.remoteAddress)}\n`);
  text(response, 404, 'not found\n');
};

for (const [address, handler] of [
  [settings.resolver, resolverSite],
  [settings.checkip, checkipSite],
  [settings.web, webSite],
] as const) {
  http.createServer((request, response) => handler(request, response, false)).listen(80, address);
  http2
    .createSecureServer({ ...tls, allowHTTP1: true }, (request, response) => handler(request, response, true))
    .listen(443, address);
}

process.on('SIGTERM', () => process.exit(0));
