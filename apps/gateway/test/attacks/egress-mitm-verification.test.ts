import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import dnsPacket from 'dns-packet';
import { ensureLab, type LabDescription } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { egressSettingsFrom } from '../../src/config.js';
import { TunnelEgressTester } from '../../src/egress/egress-tester.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { labEgressEnv } from '../helpers/lab-egress.js';

/** What the man in the middle did with each connection it was asked for. */
interface MitmRecord {
  target: string;
  handling: 'answered in clear' | 'through the declared exit' | 'from its own address';
  whoami?: boolean;
}

/**
 * A SOCKS5 upstream run by someone who wants an exit of theirs verified as another: its users' traffic leaves
 * from its own address (this machine's, 198.51.100.2 in the lab), while everything it takes for verification
 * gets the declared exit. What it can read (plain HTTP, plain DNS) it answers itself with the declared address;
 * TLS it cannot read, so TLS to the DNS services it knows (the probe's and the resolver's address) goes out
 * through the honest exit whose address it claims.
 */
class LyingUpstream {
  readonly records: MitmRecord[] = [];
  private readonly sockets = new Set<net.Socket>();
  private readonly server = net.createServer((client) => this.accept(this.track(client)));

  constructor(
    private readonly declaredExit: string,
    /** A SOCKS5 server without authentication that leaves from the declared exit. */
    private readonly honestExit: { address: string; port: number },
    private readonly dnsServices: string[],
  ) {}

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as net.AddressInfo).port;
  }

  close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    client.on('error', () => {});
    client.once('data', (greeting) => {
      if (greeting[0] !== 5) return client.destroy();
      client.write(Buffer.from([5, 0]));
      client.once('data', (request) => {
        // CONNECT to an IPv4 address is all v2ray's SOCKS outbound asks for here (it dials addresses).
        if (request[1] !== 1 || request[3] !== 1) return client.destroy();
        const address = [...request.subarray(4, 8)].join('.');
        const port = request.readUInt16BE(8);
        // What the client sends next waits until this upstream knows where it goes; some came with the request.
        client.pause();
        const early = request.subarray(10);
        if (early.length > 0) client.unshift(early);
        client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
        this.handle(client, address, port);
      });
    });
  }

  private handle(client: net.Socket, address: string, port: number): void {
    const target = `${address}:${port}`;
    if (port === 80) {
      this.records.push({ target, handling: 'answered in clear' });
      client.resume();
      client.once('data', () => {
        const body = `${this.declaredExit}\n`;
        client.end(
          `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
        );
      });
      return;
    }
    if (port === 53) {
      client.resume();
      client.once('data', (framed) => {
        client.pause();
        const query = dnsPacket.decode(framed.subarray(2));
        const question = query.questions?.[0];
        if (question?.type !== 'TXT' || !/^whoami\./.test(question.name)) {
          this.records.push({ target, handling: 'through the declared exit' });
          return this.relayThroughExit(client, address, port, framed);
        }
        this.records.push({ target, handling: 'answered in clear', whoami: true });
        const reply = dnsPacket.encode({
          id: query.id,
          type: 'response',
          flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
          questions: query.questions,
          answers: [{ type: 'TXT', name: question.name, class: question.class, data: [this.declaredExit] }],
        });
        const length = Buffer.alloc(2);
        length.writeUInt16BE(reply.length);
        client.end(Buffer.concat([length, reply]));
      });
      return;
    }
    if (this.dnsServices.includes(address)) {
      this.records.push({ target, handling: 'through the declared exit' });
      this.relayThroughExit(client, address, port);
    } else {
      this.records.push({ target, handling: 'from its own address' });
      pipeBoth(client, this.track(net.connect(port, address)));
    }
  }

  private track(socket: net.Socket): net.Socket {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    return socket;
  }

  /** A SOCKS5 CONNECT at the honest exit, then both ways. */
  private relayThroughExit(client: net.Socket, address: string, port: number, first?: Buffer): void {
    const exit = this.track(net.connect(this.honestExit.port, this.honestExit.address));
    exit.on('error', () => client.destroy());
    exit.once('connect', () => exit.write(Buffer.from([5, 1, 0])));
    exit.once('data', () => {
      const request = Buffer.from([5, 1, 0, 1, ...address.split('.').map(Number), port >> 8, port & 0xff]);
      exit.write(request);
      exit.once('data', (reply) => {
        if (reply[1] !== 0) return client.destroy();
        if (first) exit.write(first);
        pipeBoth(client, exit);
      });
    });
  }
}

function pipeBoth(a: net.Socket, b: net.Socket): void {
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.pipe(b);
  b.pipe(a);
}

/**
 * Issue 26: an upstream must not be able to pass verification for an exit it does not use. This one sends its
 * users' traffic out from elsewhere and answers the questions it can read itself; the egress test must fail it.
 */
describe('attack: an upstream that answers the verification itself', { skip: needs('lab') }, () => {
  let lab: LabDescription;
  let upstream: LyingUpstream;
  let port: number;
  before(async () => {
    lab = await ensureLab();
    const exit = lab.exits[0]!;
    const socks = exit.variants.socks;
    upstream = new LyingUpstream(
      exit.address,
      { address: socks.proxyConfig.server as string, port: socks.port },
      [lab.internet.address, ...(lab.public ? [lab.public.resolver.address] : [])],
    );
    port = await upstream.listen();
  });
  after(() => upstream?.close());

  it('fails the egress test with the operator’s own probe: the users’ traffic leaves from elsewhere', async () => {
    const exit = lab.exits[0]!;
    const tester = new TunnelEgressTester({
      engine: v2rayEngine,
      settings: egressSettingsFrom(labEgressEnv(lab)),
    });
    const result = await tester.test(
      { type: 'socks', server: '127.0.0.1', server_port: port, version: '5' } as never,
      exit.address,
    );
    // The upstream is reachable and some traffic passes: only the verdict can catch it.
    assert.equal(result.checks.connectivity.ok, true, JSON.stringify(result.checks));
    assert.equal(result.ok, false, `the lying upstream passed: ${JSON.stringify(result.checks)}`);
    assert.equal(result.checks.exit_ip.ok, false);
    assert.equal(result.checks.exit_ip.observed, lab.root.address);
    assert.match(
      result.checks.exit_ip.error ?? '',
      new RegExp(`sees the traffic from ${lab.root.address.replaceAll('.', '\\.')}, not the declared`),
    );
    // Nothing it answered in clear counted: every echo asked of it went over TLS.
    assert.deepEqual(
      upstream.records.filter((record) => record.handling === 'answered in clear' && !record.whoami),
      [],
    );
  });
});
