import dgram from 'node:dgram';
import { once } from 'node:events';
import net from 'node:net';
import * as packet from 'dns-packet';
import type { ListenAddress } from './config.js';
import { type DnsLog, type DnsTransport, normaliseAddress, normaliseName } from './dns-log.js';

export interface DnsZone {
  zone: string;
  answerAddress: string;
  ttl: number;
}

const RCODE = { formErr: 1, servFail: 2, notImp: 4, refused: 5 } as const;
const TCP_IDLE_MS = 30_000;

/**
 * The whole authoritative server: decodes one query, records who asked, and encodes the answer.
 * Returns undefined for input that deserves no reply (not a DNS query at all, or a response).
 */
export function answerQuery(
  query: Buffer,
  querier: string,
  transport: DnsTransport,
  zone: DnsZone,
  log: DnsLog,
): Buffer | undefined {
  let request: packet.DecodedPacket;
  try {
    request = packet.decode(query);
  } catch {
    // Answer FORMERR when at least the header is there, so the client does not wait for a timeout.
    if (query.length < 12) return undefined;
    return packet.encode({ id: query.readUInt16BE(0), type: 'response', flags: RCODE.formErr });
  }
  if (request.type === 'response') return undefined;
  const reply = (flags: number, answers: packet.Answer[] = [], authorities: packet.Answer[] = []) =>
    packet.encode({
      id: request.id ?? 0,
      type: 'response',
      flags: flags | ((request.flags ?? 0) & packet.RECURSION_DESIRED),
      questions: request.questions ?? [],
      answers,
      authorities,
    });
  const opcode = ((request.flags ?? 0) >> 11) & 0xf;
  if (opcode !== 0) return reply(RCODE.notImp);
  const question = request.questions?.[0];
  if (!question || request.questions?.length !== 1) return reply(RCODE.formErr);

  const address = normaliseAddress(querier);
  log.record(question.name, { address, transport, type: question.type, at: new Date().toISOString() });

  const name = normaliseName(question.name);
  if (name !== zone.zone && !name.endsWith(`.${zone.zone}`)) return reply(RCODE.refused);
  const { ttl } = zone;
  const soa: packet.Answer = {
    type: 'SOA',
    name: zone.zone,
    ttl,
    data: {
      mname: `ns.${zone.zone}`,
      rname: `hostmaster.${zone.zone}`,
      serial: 1,
      refresh: 3600,
      retry: 600,
      expire: 86400,
      minimum: ttl,
    },
  };
  const aa = packet.AUTHORITATIVE_ANSWER;
  const addressRecord = (ip: string): packet.Answer[] => {
    const type = net.isIPv6(ip) ? 'AAAA' : 'A';
    return type === question.type ? [{ type, name: question.name, ttl, data: ip }] : [];
  };

  let answers: packet.Answer[];
  if (name.startsWith('whoami.')) {
    answers =
      question.type === 'TXT'
        ? [{ type: 'TXT', name: question.name, ttl, data: address }]
        : addressRecord(address);
  } else if (name === zone.zone && question.type === 'SOA') {
    answers = [soa];
  } else if (name === zone.zone && question.type === 'NS') {
    answers = [{ type: 'NS', name: question.name, ttl, data: `ns.${zone.zone}` }];
  } else {
    answers = addressRecord(zone.answerAddress);
  }
  // An empty answer is NODATA; the SOA lets resolvers cache that negative answer properly (RFC 2308).
  return answers.length > 0 ? reply(aa, answers) : reply(aa, [], [soa]);
}

export interface DnsServers {
  udp: dgram.Socket;
  tcp: net.Server;
  port: number;
  close(): Promise<void>;
}

export async function startDnsServers(
  listen: ListenAddress,
  zone: DnsZone,
  log: DnsLog,
): Promise<DnsServers> {
  const tcp = net.createServer((socket) => serveTcp(socket, zone, log));
  tcp.listen(listen.port, listen.host);
  await once(tcp, 'listening');
  // With port 0 the TCP side picks the port; UDP then takes the same number.
  const port = (tcp.address() as net.AddressInfo).port;

  const udp = dgram.createSocket(net.isIPv6(listen.host) ? 'udp6' : 'udp4');
  udp.on('message', (message, remote) => {
    const response = answerQuery(message, remote.address, 'udp', zone, log);
    // A send that fails (the client went away) concerns that client only, so the error is dropped.
    if (response) udp.send(response, remote.port, remote.address, () => undefined);
  });
  try {
    udp.bind(port, listen.host);
    await once(udp, 'listening');
  } catch (error) {
    tcp.close();
    throw error;
  }
  const sockets = new Set<net.Socket>();
  tcp.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  return {
    udp,
    tcp,
    port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await Promise.all([new Promise<void>((resolve) => tcp.close(() => resolve())), closeUdp(udp)]);
    },
  };
}

function closeUdp(socket: dgram.Socket): Promise<void> {
  return new Promise((resolve) => socket.close(() => resolve()));
}

/** DNS over TCP: each message has a two-byte length prefix, and a client may send several per connection. */
function serveTcp(socket: net.Socket, zone: DnsZone, log: DnsLog): void {
  let pending = Buffer.alloc(0);
  socket.setTimeout(TCP_IDLE_MS, () => socket.destroy());
  socket.on('error', () => socket.destroy());
  socket.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 2) {
      const length = pending.readUInt16BE(0);
      if (pending.length < 2 + length) break;
      const message = pending.subarray(2, 2 + length);
      pending = pending.subarray(2 + length);
      const response = answerQuery(message, socket.remoteAddress ?? 'unknown', 'tcp', zone, log);
      if (!response) {
        socket.destroy();
        return;
      }
      const prefix = Buffer.alloc(2);
      prefix.writeUInt16BE(response.length);
      socket.write(Buffer.concat([prefix, response]));
    }
  });
}
