import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { lookup } from 'node:dns/promises';
import http from 'node:http';
import net from 'node:net';
import type { EgressTestResult, ProxyConfig } from '@ccp/api';
import dnsPacket from 'dns-packet';
import type { EgressSettings } from '../config.js';
import type { EgressTester } from '../domain/egress-ips-service.js';
import type { SocketAddress, TestConfigParams, TunnelEngine } from './tunnel-engine.js';

/** Where the egress test probes: all settings, so tests point them at the lab and operators at their probe. */
export interface EgressProbeSettings {
  /** IP echo over HTTP; its host must be an IPv4 literal so an exit with IPv6 cannot answer from another address. */
  probeUrl: string;
  /** Zone the probe's DNS server is authoritative for. */
  dnsZone: string;
  /** The probe's authoritative DNS server (asked over TCP through the tunnel for non-address queries). */
  dnsServer: SocketAddress;
  /** DNS-over-HTTPS endpoint the tunnel resolves names with. */
  dohUrl: string;
  /** Bearer token for the probe's `/dns-log`. */
  probeToken: string | null;
  /** Extra CA certificates the tunnel engine trusts (a lab or private CA). */
  caFile: string | null;
  /** The tunnel engine's executable. */
  command: string;
}

export interface EgressTesterOptions {
  engine: TunnelEngine;
  settings: EgressProbeSettings;
  /** Whole-test budget (the API promises 30 s). */
  totalTimeoutMs?: number;
  connectTimeoutMs?: number;
  dnsTimeoutMs?: number;
  /** Test-only: changes the rendered tunnel config (to prove the leak check catches a leaking one). */
  alterConfig?: (config: string) => string;
}

type Checks = EgressTestResult['checks'];

class CheckFailure extends Error {}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const sameAddress = (a: string, b: string) =>
  a.replace(/^::ffff:/, '').toLowerCase() === b.replace(/^::ffff:/, '').toLowerCase();

/** Runs the three checks of `POST /v1/admin/egress-ips/{id}/test` through a short-lived tunnel process. */
export class TunnelEgressTester implements EgressTester {
  private readonly totalTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly dnsTimeoutMs: number;

  constructor(private readonly options: EgressTesterOptions) {
    this.totalTimeoutMs = options.totalTimeoutMs ?? 28_000;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.dnsTimeoutMs = options.dnsTimeoutMs ?? 8_000;
  }

  async test(proxyConfig: ProxyConfig, declaredIp: string): Promise<EgressTestResult> {
    const started = Date.now();
    const ends = started + this.totalTimeoutMs;
    const checks: Checks = {
      connectivity: { ok: false, latency_ms: null, error: null },
      exit_ip: { ok: false, expected: declaredIp, observed: null, error: null },
      dns_leak: { ok: false, resolver_ip: null, error: null },
    };
    let child: ChildProcess | null = null;
    try {
      const serverIp = await this.resolveUpstream(proxyConfig.server);
      const [proxyPort, dnsPort] = [await freePort(), await freePort()];
      const params: TestConfigParams = {
        upstream: { config: proxyConfig, serverIp },
        probeInbound: { protocol: 'http', port: proxyPort },
        dnsPort,
        dns: { dohUrl: this.options.settings.dohUrl, tcpResolver: this.options.settings.dnsServer },
      };
      let config = this.options.engine.renderTestConfig(params);
      if (this.options.alterConfig) config = this.options.alterConfig(config);
      child = this.spawnEngine(config);
      await this.waitForPort(child, proxyPort, Math.min(ends, Date.now() + 5000));

      await this.connectivityAndExit(checks, proxyPort, declaredIp, ends);
      await this.dnsLeak(checks, dnsPort, declaredIp, ends);
    } catch (error) {
      // A failure before the checks (upstream not resolvable, engine would not start) fails all of them.
      const message = error instanceof Error ? error.message : String(error);
      for (const check of Object.values(checks)) if (!check.ok && check.error === null) check.error = message;
    } finally {
      if (child) await this.stop(child);
    }
    return {
      ok: checks.connectivity.ok && checks.exit_ip.ok && checks.dns_leak.ok,
      tested_at: new Date(started).toISOString(),
      duration_ms: Date.now() - started,
      checks,
    };
  }

  private async resolveUpstream(server: string): Promise<string> {
    if (net.isIP(server)) return server;
    try {
      return (await lookup(server, { family: 4 })).address;
    } catch {
      throw new CheckFailure(`cannot resolve the upstream host ${server}`);
    }
  }

  private spawnEngine(config: string): ChildProcess {
    const { settings, engine } = this.options;
    const child = spawn(settings.command || engine.defaultCommand, [...engine.runArgs], {
      stdio: ['pipe', 'ignore', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        ...(settings.caFile ? { SSL_CERT_FILE: settings.caFile } : {}),
      },
    });
    child.stderr?.resume();
    child.on('error', () => {});
    // The config (with the upstream's secrets) goes through stdin, never to disk.
    child.stdin?.end(config);
    return child;
  }

  private async waitForPort(child: ChildProcess, port: number, until: number): Promise<void> {
    while (Date.now() < until) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new CheckFailure('the tunnel engine exited at start');
      const open = await new Promise<boolean>((resolve) => {
        const socket = net.connect(port, '127.0.0.1');
        socket.once('connect', () => {
          socket.destroy();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
      if (open) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new CheckFailure('the tunnel engine did not start in time');
  }

  private async connectivityAndExit(checks: Checks, proxyPort: number, declaredIp: string, ends: number) {
    const target = new URL(this.options.settings.probeUrl);
    const began = Date.now();
    try {
      const body = await this.getThroughProxy(
        proxyPort,
        target,
        Math.min(this.connectTimeoutMs, ends - Date.now()),
      );
      checks.connectivity = { ok: true, latency_ms: Date.now() - began, error: null };
      const observed = body.trim();
      checks.exit_ip.observed = observed;
      checks.exit_ip.ok = sameAddress(observed, declaredIp);
      checks.exit_ip.error = checks.exit_ip.ok
        ? null
        : `the exit IP is ${observed}, not the declared ${declaredIp}`;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      checks.connectivity.error = message;
      checks.exit_ip.error = 'no answer from the probe (connectivity failed)';
    }
  }

  /** HTTP through the tunnel's loopback HTTP proxy, closing the connection so half-close is never waited on. */
  private getThroughProxy(proxyPort: number, target: URL, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => {
          request.destroy();
          reject(new CheckFailure('timeout'));
        },
        Math.max(0, timeoutMs),
      );
      const request = http.request(
        {
          host: '127.0.0.1',
          port: proxyPort,
          method: 'GET',
          path: target.toString(),
          headers: { host: target.host, connection: 'close' },
          agent: false,
        },
        (response) => {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => {
            if (body.length < 4096) body += chunk;
          });
          response.on('end', () => {
            clearTimeout(timer);
            if (response.statusCode === 200) resolve(body);
            else
              reject(new CheckFailure(`the probe answered HTTP ${response.statusCode} through the tunnel`));
          });
        },
      );
      request.on('error', (error) =>
        reject(new CheckFailure(`no connection through the tunnel: ${error.message}`)),
      );
      request.end();
    });
  }

  private async dnsLeak(checks: Checks, dnsPort: number, declaredIp: string, ends: number) {
    const { dnsZone } = this.options.settings;
    const name = `${randomBytes(10).toString('hex')}.leak.${dnsZone}`;
    try {
      const budget = () => Math.min(this.dnsTimeoutMs, ends - Date.now());
      await this.queryUdp(dnsPort, name, 'A', budget());
      const seen = await this.queriers(name, budget());
      if (seen.length === 0)
        throw new CheckFailure('the probe never saw the lookup (the name was not resolved through it)');
      checks.dns_leak.resolver_ip = seen[0]!;
      const strangers = seen.filter((address) => !sameAddress(address, declaredIp));
      if (strangers.length > 0) {
        checks.dns_leak.resolver_ip = strangers[0]!;
        throw new CheckFailure(
          `DNS leaked: the probe saw the lookup from ${[...new Set(strangers)].join(', ')}`,
        );
      }
      // Non-address queries take the engine's other DNS path (TCP through the tunnel): check it too.
      const whoami = await this.queryUdp(dnsPort, `whoami.${dnsZone}`, 'TXT', budget());
      const answer = whoami.answers?.find((a) => a.type === 'TXT');
      const text = answer
        ? Buffer.concat((answer.data as Buffer[]).map((b) => Buffer.from(b))).toString()
        : null;
      if (text === null || !sameAddress(text, declaredIp)) {
        throw new CheckFailure(`DNS leaked: a TXT lookup reached the probe from ${text ?? 'nowhere'}`);
      }
      checks.dns_leak.ok = true;
    } catch (error) {
      checks.dns_leak.error = error instanceof Error ? error.message : String(error);
    }
  }

  private queryUdp(
    port: number,
    name: string,
    type: 'A' | 'TXT',
    timeoutMs: number,
  ): Promise<dnsPacket.Packet> {
    return new Promise((resolve, reject) => {
      const socket = dgram.createSocket('udp4');
      const timer = setTimeout(() => done(() => reject(new CheckFailure('timeout'))), Math.max(0, timeoutMs));
      const id = randomBytes(2).readUInt16BE(0);
      const query = dnsPacket.encode({
        id,
        type: 'query',
        flags: dnsPacket.RECURSION_DESIRED,
        questions: [{ type, name }],
      });
      const retry = setInterval(() => socket.send(query, port, '127.0.0.1'), 1000);
      let finished = false;
      const done = (fn: () => void) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        clearInterval(retry);
        socket.close();
        fn();
      };
      socket.on('message', (message) => {
        const answer = dnsPacket.decode(message);
        if (answer.id !== id) return;
        const rcode = (answer.flags ?? 0) & 0x0f;
        if (rcode !== 0) {
          done(() =>
            reject(new CheckFailure(`the lookup of ${name} through the tunnel failed (DNS rcode ${rcode})`)),
          );
        } else done(() => resolve(answer));
      });
      socket.on('error', (error) => done(() => reject(error)));
      socket.send(query, port, '127.0.0.1');
    });
  }

  /** Who the probe's authoritative server saw asking for `name`, read directly from the probe. */
  private async queriers(name: string, timeoutMs: number): Promise<string[]> {
    const { probeUrl, probeToken } = this.options.settings;
    const url = new URL('/dns-log', probeUrl);
    url.searchParams.set('name', name);
    let response: Response;
    try {
      response = await fetch(url, {
        headers: { connection: 'close', ...(probeToken ? { authorization: `Bearer ${probeToken}` } : {}) },
        signal: AbortSignal.timeout(Math.max(1, timeoutMs)),
      });
    } catch (error) {
      if ((error as Error).name === 'TimeoutError') throw new CheckFailure('timeout');
      throw new CheckFailure(`the probe's DNS log cannot be read: ${(error as Error).message}`);
    }
    if (!response.ok) throw new CheckFailure(`the probe's DNS log answered HTTP ${response.status}`);
    const body = (await response.json()) as { queries?: { address: string }[] };
    return (body.queries ?? []).map((q) => q.address);
  }

  /** SIGTERM, then SIGKILL: the tunnel process never outlives the test. */
  private async stop(child: ChildProcess): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 1000);
    await exited;
    clearTimeout(timer);
  }
}

/** The tester for the configured probe, or one that explains which settings are missing. */
export function egressTesterFor(settings: EgressSettings, engine: TunnelEngine): EgressTester {
  const { probeUrl, dnsZone, dnsServer, dohUrl } = settings;
  if (probeUrl && dnsZone && dnsServer && dohUrl) {
    return new TunnelEgressTester({
      engine,
      settings: {
        probeUrl,
        dnsZone,
        dnsServer,
        dohUrl,
        probeToken: settings.probeToken,
        caFile: settings.caFile,
        command: settings.v2rayCommand,
      },
    });
  }
  const missing = Object.entries({
    EGRESS_PROBE_URL: probeUrl,
    EGRESS_PROBE_DNS_ZONE: dnsZone,
    EGRESS_PROBE_DNS_SERVER: dnsServer,
    EGRESS_DOH_URL: dohUrl,
  })
    .filter(([, value]) => !value)
    .map(([name]) => name);
  const error = `the egress probe is not configured (set ${missing.join(', ')}; see docs/egress-probe.md)`;
  return {
    async test(_config, declaredIp) {
      return {
        ok: false,
        tested_at: new Date().toISOString(),
        duration_ms: 0,
        checks: {
          connectivity: { ok: false, latency_ms: null, error },
          exit_ip: { ok: false, expected: declaredIp, observed: null, error },
          dns_leak: { ok: false, resolver_ip: null, error },
        },
      };
    },
  };
}
