/**
 * Smoke test of the egress lab: every exit inbound carries traffic and DNS, the probe sees only the exit's
 * address, the root namespace reaches the lab only through the router, and `lab.sh down` leaves nothing
 * behind.
 * Each variant runs a throwaway v2ray client with a hand-written config (the product's translator lives in
 * apps/gateway and is tested on its own; this checks the lab, not the translator).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import dnsPacket from 'dns-packet';
import {
  ensureLab,
  LAB_SCRIPT,
  type LabDescription,
  type LabExit,
  type LabVariant,
  labUnavailable,
  readDnsLog,
  readResolverLog,
  readSourceCounters,
  resetSourceCounters,
  stopLab,
  type VariantName,
} from './lab.js';

const run = promisify(execFile);
const skip = labUnavailable();
const clients = new Set<ChildProcess>();
let lab: LabDescription;

const random = () => randomBytes(10).toString('hex');

// ------------------------------------------------------------------ a v2ray client, test-only config

const SS_METHODS: Record<string, string> = {
  'aes-128-gcm': 'aes-128-gcm',
  'aes-256-gcm': 'aes-256-gcm',
  'chacha20-ietf-poly1305': 'chacha20-poly1305',
};

function clientOutbound(v: LabVariant, exit: LabExit): Record<string, unknown> {
  const c = v.proxyConfig;
  const server = { address: c.server, port: c.server_port };
  let protocolPart: Record<string, unknown>;
  switch (c.type) {
    case 'socks':
    case 'http':
      protocolPart = {
        servers: [{ ...server, users: c.username ? [{ user: c.username, pass: c.password }] : [] }],
      };
      break;
    case 'shadowsocks':
      protocolPart = { servers: [{ ...server, method: SS_METHODS[c.method ?? ''], password: c.password }] };
      break;
    case 'vmess':
      protocolPart = { vnext: [{ ...server, users: [{ id: c.uuid, alterId: 0, security: 'auto' }] }] };
      break;
    case 'vless':
      protocolPart = { vnext: [{ ...server, users: [{ id: c.uuid, encryption: 'none' }] }] };
      break;
    case 'trojan':
      protocolPart = { servers: [{ ...server, password: c.password }] };
      break;
    default:
      throw new Error(`unknown protocol ${c.type}`);
  }
  return {
    tag: 'proxy',
    protocol: c.type,
    settings: protocolPart,
    streamSettings: {
      network: v.transport,
      security: v.tls ? 'tls' : 'none',
      ...(v.tls ? { tlsSettings: { serverName: exit.tlsServerName } } : {}),
      ...(v.wsPath ? { wsSettings: { path: v.wsPath } } : {}),
    },
  };
}

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function waitForPort(port: number, child: ChildProcess, output: () => string): Promise<void> {
  for (let i = 0; i < 250; i++) {
    if (child.exitCode !== null) throw new Error(`v2ray exited (${child.exitCode}):\n${output()}`);
    const connected = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (connected) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`v2ray did not listen on ${port}:\n${output()}`);
}

async function stopClient(child: ChildProcess): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  }
  clients.delete(child);
}

/** Starts v2ray with a SOCKS inbound, and a DNS inbound whose queries go through the proxy (DoH, probe). */
async function withClient<T>(
  outbound: Record<string, unknown>,
  use: (ports: { socks: number; dns: number }) => Promise<T>,
): Promise<T> {
  const ports = { socks: await freePort(), dns: await freePort() };
  const inet = lab.internet.address;
  const config = {
    log: { loglevel: 'warning' },
    dns: { servers: [lab.internet.dohUrl], tag: 'dns-internal' },
    inbounds: [
      {
        tag: 'socks-in',
        listen: '127.0.0.1',
        port: ports.socks,
        protocol: 'socks',
        settings: { auth: 'noauth' },
      },
      {
        tag: 'dns-in',
        listen: '127.0.0.1',
        port: ports.dns,
        protocol: 'dokodemo-door',
        settings: { address: inet, port: 53, network: 'tcp,udp' },
      },
    ],
    outbounds: [
      outbound,
      // A and AAAA are answered by the built-in DNS (DoH, routed to the proxy); other types go to the probe
      // over TCP, chained through the proxy so they cannot leave directly.
      {
        tag: 'dns-out',
        protocol: 'dns',
        settings: { network: 'tcp', address: inet, port: 53 },
        proxySettings: { tag: 'proxy' },
      },
    ],
    routing: {
      rules: [
        { type: 'field', inboundTag: ['dns-in'], outboundTag: 'dns-out' },
        { type: 'field', inboundTag: ['dns-internal'], outboundTag: 'proxy' },
      ],
    },
  };
  // Fed on stdin so nothing is left on disk; SSL_CERT_FILE makes Go trust the lab CA (exits and DoH).
  const child = spawn('v2ray', ['-config', 'stdin:'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, SSL_CERT_FILE: lab.caCert },
  });
  clients.add(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stdin?.end(JSON.stringify(config));
  try {
    await waitForPort(ports.socks, child, () => output);
    return await use(ports);
  } catch (error) {
    throw new Error(`${(error as Error).message}\n--- v2ray output ---\n${output}`);
  } finally {
    await stopClient(child);
  }
}

// ------------------------------------------------------------------ SOCKS5 and HTTP by hand

/** Reads exactly what it is told to from the socket, in order; used while nothing else listens. */
function byteReader(socket: net.Socket) {
  let pending = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  let ended = false;
  const onData = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    wake?.();
  };
  const onEnd = () => {
    ended = true;
    wake?.();
  };
  socket.on('data', onData);
  socket.on('end', onEnd);
  socket.on('close', onEnd);
  return {
    async read(n: number): Promise<Buffer> {
      while (pending.length < n) {
        if (ended) throw new Error(`connection closed after ${pending.length} of ${n} bytes`);
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
      const out = pending.subarray(0, n);
      pending = pending.subarray(n);
      return out;
    },
    async readUntil(marker: string): Promise<Buffer> {
      for (;;) {
        const at = pending.indexOf(marker);
        if (at >= 0) return this.read(at + marker.length);
        if (ended) throw new Error(`connection closed before ${JSON.stringify(marker)}`);
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
      }
    },
  };
}

/** SOCKS5 CONNECT through the v2ray client; `host` is an IPv4 literal or a name for the exit to resolve. */
async function socksConnect(socksPort: number, host: string, port: number) {
  const socket = net.connect(socksPort, '127.0.0.1');
  socket.setTimeout(10_000, () => socket.destroy(new Error('socks: timeout')));
  await once(socket, 'connect');
  const reader = byteReader(socket);
  socket.write(Buffer.from([5, 1, 0]));
  assert.deepEqual([...(await reader.read(2))], [5, 0]);
  const address = net.isIPv4(host)
    ? Buffer.from([1, ...host.split('.').map(Number)])
    : Buffer.concat([Buffer.from([3, host.length]), Buffer.from(host)]);
  const portBytes = Buffer.from([port >> 8, port & 0xff]);
  socket.write(Buffer.concat([Buffer.from([5, 1, 0]), address, portBytes]));
  const head = await reader.read(4);
  assert.equal(head[1], 0, `socks CONNECT to ${host}:${port} failed with reply ${head[1]}`);
  const bound = head[3] === 1 ? 4 : head[3] === 4 ? 16 : (await reader.read(1))[0]!;
  await reader.read(bound + 2);
  return { socket, reader };
}

/** GET over the tunnel, reading by Content-Length: v2ray is slow to pass a half-close along. */
async function tunnelGet(
  socksPort: number,
  host: string,
  path: string,
): Promise<{ status: number; body: Buffer }> {
  const { socket, reader } = await socksConnect(socksPort, host, 80);
  try {
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    const head = (await reader.readUntil('\r\n\r\n')).toString();
    const status = Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1]);
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
    assert.ok(Number.isInteger(length), `no Content-Length in ${head}`);
    return { status, body: await reader.read(length) };
  } finally {
    socket.destroy();
  }
}

function resolverAt(port: number): Resolver {
  const resolver = new Resolver({ timeout: 4000, tries: 2 });
  resolver.setServers([`127.0.0.1:${port}`]);
  return resolver;
}

async function netnsExec(ns: string, ...command: string[]): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await run('ip', ['netns', 'exec', ns, ...command], { timeout: 10_000 });
    return { code: 0, stdout };
  } catch (error) {
    const { code, stdout } = error as { code?: number; stdout?: string };
    return { code: typeof code === 'number' ? code : -1, stdout: stdout ?? '' };
  }
}

/** True when the process has exited; a zombie counts as gone, since PID 1 on this machine may reap late. */
function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

// ------------------------------------------------------------------ the tests

before(async () => {
  if (skip) return;
  lab = await ensureLab();
});

after(async () => {
  await Promise.all([...clients].map(stopClient));
});

describe('egress lab', { skip, concurrency: false }, () => {
  test('up is idempotent and keeps the same lab', async () => {
    const again = await ensureLab();
    assert.deepEqual(again, lab);
    assert.ok(existsSync(lab.caCert));
    assert.equal(lab.exitAddress, lab.exits[0]?.address);
    assert.ok(lab.exits.length >= 1);
  });

  const names: VariantName[] = [
    'socks',
    'socks-auth',
    'http-auth',
    'http-auth-tls',
    'ss-aes-128-gcm',
    'ss-aes-256-gcm',
    'ss-chacha20-ietf-poly1305',
    'vmess-tcp',
    'vmess-tls',
    'vmess-ws',
    'vmess-ws-tls',
    'vless-tcp',
    'vless-tls',
    'vless-ws-tls',
    'trojan-tls',
  ];
  for (const name of names) {
    test(`${name}: traffic and DNS leave through the exit only`, { timeout: 60_000 }, async () => {
      const exit = lab.exits[0]!;
      const v = exit.variants[name];
      const inet = lab.internet.address;
      const zone = lab.internet.zone;
      await withClient(clientOutbound(v, exit), async (ports) => {
        // The IP echo, dialled by IPv4 literal, sees the exit.
        const echo = await tunnelGet(ports.socks, inet, '/ip');
        assert.equal(echo.status, 200);
        assert.equal(echo.body.toString(), exit.address);

        // A query: dns-in -> built-in DNS -> DoH to the probe, through the proxy.
        const viaDoh = `${random()}.leak.${zone}`;
        assert.deepEqual(await resolverAt(ports.dns).resolve4(viaDoh), [lab.internet.answerAddress]);
        const dohLog = await readDnsLog(lab, viaDoh);
        assert.ok(dohLog.length > 0, 'the probe saw the query');
        assert.deepEqual(new Set(dohLog.map((e) => e.address)), new Set([exit.address]));
        assert.deepEqual(new Set(dohLog.map((e) => e.transport)), new Set(['doh']));

        // TXT: the dns outbound sends it over TCP, chained through the proxy.
        const whoami = `whoami.${random()}.${zone}`;
        assert.deepEqual(await resolverAt(ports.dns).resolveTxt(whoami), [[exit.address]]);
        const tcpLog = await readDnsLog(lab, whoami);
        assert.deepEqual(
          tcpLog.map((e) => [e.address, e.transport]),
          [[exit.address, 'tcp']],
        );

        // A name handed to the exit is resolved by the exit's own resolver (the stand-in public resolver, asked
        // by the exit only), which asks the probe as a recursive resolver would.
        const byName = `${random()}.name.${zone}`;
        const named = await tunnelGet(ports.socks, byName, '/ip');
        assert.equal(named.body.toString(), exit.address);
        const exitLog = await readResolverLog(lab, byName);
        assert.ok(exitLog.length > 0);
        assert.deepEqual(new Set(exitLog.map((e) => e.address)), new Set([exit.address]));
        const probeLog = await readDnsLog(lab, byName);
        assert.deepEqual(new Set(probeLog.map((e) => e.address)), new Set([lab.public.resolver.address]));

        const bulk = await tunnelGet(ports.socks, inet, '/bytes/2000000');
        assert.equal(bulk.body.length, 2_000_000);
      });
    });
  }

  test('every other exit node serves with its own address', async () => {
    for (const exit of lab.exits.slice(1)) {
      for (const name of ['vless-tls', 'ss-aes-256-gcm'] as const) {
        await withClient(clientOutbound(exit.variants[name], exit), async (ports) => {
          const echo = await tunnelGet(ports.socks, lab.internet.address, '/ip');
          assert.equal(echo.body.toString(), exit.address, `${exit.name} ${name}`);
        });
      }
    }
  });

  test('the fake internet counts packets per source: only the exit while tunnelling', async () => {
    const exit = lab.exits[0]!;
    await resetSourceCounters();
    await withClient(clientOutbound(exit.variants['vmess-tcp'], exit), async (ports) => {
      assert.equal((await tunnelGet(ports.socks, lab.internet.address, '/ip')).body.toString(), exit.address);
    });
    const tunnelled = await readSourceCounters();
    assert.deepEqual(
      tunnelled.map((c) => c.address),
      [exit.address],
    );
    assert.ok(tunnelled[0]!.packets > 0);

    // A direct request from the root namespace shows the root's lab address: that is what a leak looks like.
    const direct = await fetch(`${lab.internet.httpUrl}/ip`, { headers: { connection: 'close' } });
    assert.equal(await direct.text(), lab.root.address);
    const after = await readSourceCounters();
    assert.ok(after.some((c) => c.address === lab.root.address && c.packets > 0));
    await resetSourceCounters();
    // The tunnel's connection to the probe may still send its closing packets from the exit after the reset.
    assert.deepEqual(
      (await readSourceCounters()).filter((c) => c.address !== exit.address),
      [],
    );
  });

  test('the root namespace reaches the lab only through the router, and the lab has no way out', async () => {
    // No root address lies in the fake internet's subnet, so nothing can reach it on a link of its own.
    const { stdout: addrs } = await run('ip', ['-j', 'addr', 'show']);
    const rootAddresses = (JSON.parse(addrs) as Array<{ addr_info: Array<{ local: string }> }>).flatMap(
      (link) => link.addr_info.map((a) => a.local),
    );
    assert.ok(!rootAddresses.some((a) => a.startsWith('203.0.113.')));
    for (const target of [lab.internet.address, lab.exitAddress]) {
      const { stdout } = await run('ip', ['-j', 'route', 'get', target]);
      const [route] = JSON.parse(stdout) as Array<{ dev: string; gateway?: string; prefsrc: string }>;
      assert.equal(route?.dev, lab.root.link);
      assert.equal(route?.gateway, lab.root.gateway);
      assert.equal(route?.prefsrc, lab.root.address);
    }
    // The root keeps its own default route (eth0); the lab adds only the lab prefixes.
    const { stdout: rootRoutes } = await run('ip', ['-j', 'route', 'show', 'dev', lab.root.link]);
    const viaLab = (JSON.parse(rootRoutes) as Array<{ dst: string }>).map((r) => r.dst);
    assert.ok(!viaLab.includes('default'));

    // The router has no default route: addresses outside the lab are unreachable from inside it.
    const rtr = lab.router.namespace;
    assert.equal((await netnsExec(rtr, 'ip', 'route', 'show', 'default')).stdout.trim(), '');
    assert.notEqual((await netnsExec(rtr, 'ip', 'route', 'get', '192.0.2.1')).code, 0);

    // Names resolve inside the lab only: the exit's resolver is the stand-in public resolver, which knows the
    // public zone and asks the probe for the probe's; nothing else resolves.
    const exitNs = lab.exits[0]!.namespace;
    const inZone = await netnsExec(exitNs, 'getent', 'ahostsv4', `x.${lab.internet.zone}`);
    assert.match(inZone.stdout, new RegExp(`^${lab.internet.address.replaceAll('.', '\\.')}\\s`));
    const publicName = await netnsExec(exitNs, 'getent', 'ahostsv4', lab.public.web.name);
    assert.match(publicName.stdout, new RegExp(`^${lab.public.web.address.replaceAll('.', '\\.')}\\s`));
    assert.notEqual((await netnsExec(exitNs, 'getent', 'hosts', 'example.com')).code, 0);
  });

  describe('stand-ins for public services, as seen from an exit', () => {
    const exit = () => lab.exits[0]!;
    const inExit = (...command: string[]) => netnsExec(exit().namespace, ...command);
    const curl = (...args: string[]) =>
      inExit('curl', '-fsS', '--max-time', '5', '--cacert', lab.caCert, ...args);

    test('the resolver answers public names over UDP, TCP and DoH, and logs who asked', async () => {
      const { resolver, web } = lab.public;
      // The log holds every earlier question for the name too (other tests ask it from workspaces' exits).
      const since = new Date().toISOString();
      for (const transport of [[], ['+tcp']]) {
        const { stdout } = await inExit('dig', '+short', ...transport, `@${resolver.address}`, web.name, 'A');
        assert.equal(stdout.trim(), web.address);
      }
      const doh = await inExit('dig', '+short', '+https', `@${resolver.address}`, web.name, 'A');
      assert.equal(doh.stdout.trim(), web.address, 'DoH (dig +https, which checks no certificate)');
      const log = (await readResolverLog(lab, web.name)).filter((entry) => entry.at >= since);
      assert.deepEqual(
        log.map((entry) => [entry.address, entry.transport]),
        [
          [exit().address, 'udp'],
          [exit().address, 'tcp'],
          [exit().address, 'doh'],
        ],
      );
    });

    test('whoami.cloudflare (CH and IN) answers the asker; probe-zone names come back through it', async () => {
      const { resolver } = lab.public;
      for (const klass of ['CH', 'IN']) {
        const { stdout } = await inExit(
          'dig',
          '+short',
          '+tcp',
          `@${resolver.address}`,
          resolver.whoamiName,
          'TXT',
          klass,
        );
        assert.equal(stdout.trim(), `"${exit().address}"`);
      }
      const { stdout } = await inExit('dig', '+short', `@${resolver.address}`, `y.${lab.internet.zone}`, 'A');
      assert.equal(stdout.trim(), lab.internet.answerAddress);
      assert.equal(
        (await inExit('dig', '+short', `@${resolver.address}`, 'example.com', 'A')).stdout.trim(),
        '',
      );
    });

    test('the trace, checkip and the web site see the exit; DoH answers over HTTPS', async () => {
      const trace = await curl(lab.public.resolver.traceUrl);
      assert.match(trace.stdout, new RegExp(`^ip=${exit().address.replaceAll('.', '\\.')}$`, 'm'));
      assert.equal((await curl(lab.public.checkip.url)).stdout, `${exit().address}\n`);
      assert.equal((await curl(`${lab.public.web.httpsUrl}/`)).stdout, 'ccp-lab public web\n');
      assert.equal((await curl(`${lab.public.web.httpUrl}/ip`)).stdout.trim(), exit().address);
      const query = dnsPacket
        .encode({ id: 7, type: 'query', questions: [{ type: 'A', name: lab.public.checkip.name }] })
        .toString('base64url');
      const file = join(lab.runDir, `doh-${random()}.bin`);
      const fetched = await curl('-o', file, `${lab.public.resolver.dohUrl}?dns=${query}`);
      assert.equal(fetched.code, 0);
      const reply = dnsPacket.decode(readFileSync(file));
      assert.deepEqual(
        reply.answers?.map((answer) => (answer.type === 'A' ? answer.data : answer.type)),
        [lab.public.checkip.address],
      );
    });
  });

  test('down removes every namespace, link, process and file', { timeout: 120_000 }, async () => {
    const pidDir = join(lab.runDir, 'pids');
    const pids = readdirSync(pidDir).map((name) =>
      Number(readFileSync(join(pidDir, name), 'utf8').split(' ')[0]),
    );
    assert.ok(pids.length >= 2);
    await stopLab();
    const { stdout: namespaces } = await run('ip', ['netns', 'list']);
    assert.doesNotMatch(namespaces, /ccp-lab-/);
    const { stdout: links } = await run('ip', ['-o', 'link', 'show']);
    assert.doesNotMatch(links, /ccp-lab-/);
    for (const pid of pids) assert.ok(processGone(pid), `process ${pid} is gone`);
    assert.ok(!existsSync(lab.runDir));
    assert.ok(
      !existsSync('/etc/netns') || !readdirSync('/etc/netns').some((name) => name.startsWith('ccp-lab-')),
    );
    const status = await run('bash', [LAB_SCRIPT, 'status']).catch((error: { stdout: string }) => error);
    assert.match(status.stdout, /lab: down/);
  });
});
