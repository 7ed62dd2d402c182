import { type ChildProcess, spawn } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import http from 'node:http';
import net from 'node:net';
import type { EgressTestResult, ProxyConfig } from '@ccp/api';
import {
  exitVerdict,
  observedExit,
  probeLogVerdict,
  sameAddress,
  trustFor,
  tunnelDns,
  type VerificationPlan,
  verificationPlan,
  whoamiVerdict,
} from './egress-verification.js';
import { freeLoopbackPort, waitUntilListening } from './loopback-ports.js';
import {
  askDoh,
  askResolver,
  CheckError,
  connectTls,
  type DnsReply,
  decodeReply,
  type EchoOutcome,
  echoHeaders,
  encodeQuery,
  probeLeakName,
  readBody,
  readProbeLog,
  resolveIPv4,
  txtText,
} from './probe-client.js';
import type { EgressSettings } from './settings.js';
import type { TestConfigParams, TunnelEngine } from './tunnel-engine.js';

export interface EgressTesterOptions {
  engine: TunnelEngine;
  settings: EgressSettings;
  /** Whole-test budget (the API promises 30 s). */
  totalTimeoutMs?: number;
  connectTimeoutMs?: number;
  dnsTimeoutMs?: number;
  /** Test-only: changes the rendered tunnel config (to prove the leak check catches a leaking one). */
  alterConfig?: (config: string) => string;
}

type Checks = EgressTestResult['checks'];

class CheckFailure extends Error {}

/**
 * Dials the upstream from this machine, as the engine does, to tell a refusal or silence at the upstream itself
 * from a failure past it.
 */
type DialOutcome = 'open' | 'refused' | 'unreachable' | 'timeout';

function dialUpstream(address: string, port: number, timeoutMs: number): Promise<DialOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: address, port });
    const done = (outcome: DialOutcome) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => done('timeout'), Math.max(0, timeoutMs));
    socket.once('connect', () => done('open'));
    socket.on('error', (error: NodeJS.ErrnoException) =>
      done(error.code === 'ECONNREFUSED' ? 'refused' : 'unreachable'),
    );
  });
}

const NOT_CHECKED = 'not checked: nothing passes through the upstream (connectivity failed)';

/** What a direct dial to the upstream says is wrong with it, or null when it accepted (or took too long). */
function dialRefusal(outcome: DialOutcome, upstream: string): string | null {
  if (outcome === 'refused') return `the upstream ${upstream} refused the connection`;
  if (outcome === 'unreachable') return `no route to the upstream ${upstream}`;
  return null;
}

/** The checks when the upstream cannot even be reached: connectivity names why, the others were not run. */
function failBeforeTunnel(checks: Checks, why: string): void {
  checks.connectivity.error = why;
  checks.exit_ip.error = 'no answer through the upstream (connectivity failed)';
  checks.dns_leak.error = NOT_CHECKED;
}

/** The last few KiB the engine printed: its warnings name the hop that failed. */
class EngineLog {
  private text = '';
  append(chunk: Buffer): void {
    this.text = (this.text + chunk.toString()).slice(-8192);
  }
  /** What went wrong between the engine and the upstream, in words, when its log says. */
  upstreamFailure(server: string): string | null {
    const text = this.text;
    if (/connection refused/i.test(text)) return `the upstream ${server} refused the connection`;
    if (/no route to host|network is unreachable/i.test(text)) return `no route to the upstream ${server}`;
    if (/x509|certificate|tls: /i.test(text)) {
      const line = /(?:x509|tls): [^\n]*/i.exec(text)?.[0] ?? 'TLS error';
      return `the TLS handshake with the upstream ${server} failed (${line.trim()})`;
    }
    // Only the engine's own dial timing out says the upstream did not answer; any other timeout in the log is a
    // request through a connection the upstream accepted and then left unanswered (as a wrong UUID is).
    if (/dial tcp[^\n]*(?:timed out|i\/o timeout)/i.test(text))
      return `the upstream ${server} did not answer in time`;
    if (/connection reset|unexpected EOF|\bEOF\b|closed/i.test(text))
      return `the upstream ${server} closed the connection (a wrong password, UUID or method looks like this)`;
    return null;
  }
}

/** Runs the three egress checks for one upstream (what the egress IPs service asks of egress/). */
export interface EgressTester {
  test(proxyConfig: ProxyConfig, declaredIp: string): Promise<EgressTestResult>;
}

/** Runs the three checks of `POST /v1/admin/egress-ips/{id}/test` through a short-lived tunnel process. */
export class TunnelEgressTester implements EgressTester {
  private readonly totalTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly dnsTimeoutMs: number;
  private readonly plan: VerificationPlan;

  constructor(private readonly options: EgressTesterOptions) {
    this.totalTimeoutMs = options.totalTimeoutMs ?? 28_000;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.dnsTimeoutMs = options.dnsTimeoutMs ?? 8_000;
    this.plan = verificationPlan(options.settings);
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
    const log = new EngineLog();
    try {
      const serverIp = await this.resolveUpstream(proxyConfig.server);
      const [proxyPort, dnsPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
      const { settings } = this.options;
      const params: TestConfigParams = {
        upstream: { config: proxyConfig, serverIp },
        probeInbound: { protocol: 'http', port: proxyPort },
        dnsPort,
        dns: tunnelDns(settings),
      };
      let config = this.options.engine.renderTestConfig(params);
      if (this.options.alterConfig) config = this.options.alterConfig(config);
      child = await this.spawnEngine(config, log);
      await this.waitForPort(child, proxyPort, Math.min(ends, Date.now() + 5000));

      const upstream = `${proxyConfig.server}:${proxyConfig.server_port}`;
      const dial = () => dialUpstream(serverIp, proxyConfig.server_port, Math.min(3000, ends - Date.now()));
      // A refused or unrouted upstream is told at once, not after the echo's timeout through the tunnel.
      const refusal = dialRefusal(await dial(), upstream);
      if (refusal) {
        failBeforeTunnel(checks, refusal);
        return this.result(started, checks);
      }
      await this.connectivityAndExit(
        checks,
        { proxyPort, dnsPort },
        declaredIp,
        ends,
        async () =>
          dialRefusal(await dial(), upstream) ??
          log.upstreamFailure(upstream) ??
          `the upstream ${upstream} accepted the connection, but nothing came back through it (wrong credentials, or the upstream cannot reach the IP echo)`,
      );
      if (checks.connectivity.ok)
        await this.dnsPath(checks, { proxyPort, dnsPort }, declaredIp, checks.exit_ip.observed, ends);
      // Through an upstream that passes nothing there is no DNS path to judge; the resolver is not at fault.
      else checks.dns_leak.error = NOT_CHECKED;
    } catch (error) {
      // A failure before the checks (upstream not resolvable, engine would not start) fails all of them.
      const message = error instanceof Error ? error.message : String(error);
      for (const check of Object.values(checks)) if (!check.ok && check.error === null) check.error = message;
    } finally {
      if (child) await this.stop(child);
    }
    return this.result(started, checks);
  }

  private result(started: number, checks: Checks): EgressTestResult {
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

  /** Starts the engine, telling "not installed" apart from every other way it can fail to start. */
  private async spawnEngine(config: string, log: EngineLog): Promise<ChildProcess> {
    const { settings, engine } = this.options;
    const command = settings.v2rayCommand || engine.defaultCommand;
    const child = spawn(command, [...engine.runArgs], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        ...(settings.caFile ? { SSL_CERT_FILE: settings.caFile } : {}),
      },
    });
    child.stdout?.on('data', (chunk: Buffer) => log.append(chunk));
    child.stderr?.on('data', (chunk: Buffer) => log.append(chunk));
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new CheckFailure(
            error.code === 'ENOENT'
              ? `the tunnel engine ${command} is not installed on the gateway's machine (deploy/setup.sh installs it; V2RAY_BIN names another)`
              : `the tunnel engine ${command} cannot be started: ${error.message}`,
          ),
        ),
      );
    });
    child.on('error', () => {});
    // The config (with the upstream's secrets) goes through stdin, never to disk.
    child.stdin?.end(config);
    return child;
  }

  private async waitForPort(child: ChildProcess, port: number, until: number): Promise<void> {
    const listening = await waitUntilListening(port, until, {
      check: () => {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new CheckFailure(
            `the tunnel engine exited at start (status ${child.exitCode ?? child.signalCode})`,
          );
      },
    });
    if (!listening) throw new CheckFailure('the tunnel engine did not open its port within 5 seconds');
  }

  /**
   * Every IP echo through the tunnel, all at once: connectivity is any of them answering (one provider's outage
   * says nothing of the upstream), the exit IP check wants every answer to see the declared address and at least
   * EGRESS_EXIT_IP_MIN_ANSWERS answers.
   */
  private async connectivityAndExit(
    checks: Checks,
    ports: { proxyPort: number; dnsPort: number },
    declaredIp: string,
    ends: number,
    upstreamFailure: () => Promise<string>,
  ) {
    const began = Date.now();
    let firstAnswerMs: number | null = null;
    const outcomes: EchoOutcome[] = await Promise.all(
      this.plan.exitIpUrls.map(async (url): Promise<EchoOutcome> => {
        const budget = Math.min(this.connectTimeoutMs, ends - Date.now());
        try {
          const body = await this.echo(ports, new URL(url), budget);
          firstAnswerMs ??= Date.now() - began;
          return { url, status: 200, body };
        } catch (error) {
          return { url, error: error instanceof Error ? error.message : String(error) };
        }
      }),
    );
    if (firstAnswerMs === null) {
      // The HTTP side only sees a timeout or a 503: name the hop that failed (the upstream itself, or past it).
      const hop = await upstreamFailure();
      checks.connectivity.error = `${hop} (${outcomes.map((o) => `${o.url}: ${o.error}`).join('; ')})`;
      checks.exit_ip.error = 'no answer through the upstream (connectivity failed)';
      return;
    }
    checks.connectivity = { ok: true, latency_ms: firstAnswerMs, error: null };
    checks.exit_ip.observed = observedExit(outcomes, declaredIp);
    const verdict = exitVerdict(outcomes, declaredIp, this.plan.minEchoAnswers);
    checks.exit_ip.ok = verdict === null;
    checks.exit_ip.error = verdict?.message ?? null;
  }

  /** One IP echo through the tunnel's HTTP proxy; a host name is resolved through the tunnel first. */
  private async echo(
    ports: { proxyPort: number; dnsPort: number },
    url: URL,
    timeoutMs: number,
  ): Promise<string> {
    const address = await resolveIPv4(url.hostname, tunnelResolver(ports.dnsPort), timeoutMs);
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    return url.protocol === 'https:'
      ? this.getOverConnect(ports.proxyPort, url, address, port, timeoutMs)
      : this.getThroughProxy(ports.proxyPort, url, address, port, timeoutMs);
  }

  /** Plain HTTP through the proxy, closing the connection so half-close is never waited on. */
  private getThroughProxy(
    proxyPort: number,
    url: URL,
    address: string,
    port: number,
    timeoutMs: number,
  ): Promise<string> {
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
          path: `http://${address}:${port}${url.pathname}${url.search}`,
          headers: echoHeaders(url),
          agent: false,
        },
        (response) => {
          readBody(response).then((body) => {
            clearTimeout(timer);
            if (response.statusCode === 200) resolve(body);
            else reject(new CheckFailure(`${url} answered HTTP ${response.statusCode} through the tunnel`));
          }, reject);
        },
      );
      request.on('error', (error) => {
        clearTimeout(timer);
        reject(new CheckFailure(`no connection through the tunnel: ${error.message}`));
      });
      request.end();
    });
  }

  /** HTTPS: CONNECT through the proxy to the address, then TLS for the URL's own name. */
  private async getOverConnect(
    proxyPort: number,
    url: URL,
    address: string,
    port: number,
    timeoutMs: number,
  ): Promise<string> {
    const until = Date.now() + timeoutMs;
    const socket = await connectThrough(proxyPort, address, port, timeoutMs, url.host);
    return new Promise((resolve, reject) => {
      let settled = false;
      const secure = connectTls(url, trustFor(this.plan, url.href), socket);
      const finish = (error: Error | null, body?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        secure.destroy();
        if (error) reject(error);
        else resolve(body ?? '');
      };
      const timer = setTimeout(() => finish(new CheckFailure('timeout')), Math.max(0, until - Date.now()));
      const request = http.request(
        {
          createConnection: () => secure,
          method: 'GET',
          path: `${url.pathname}${url.search}`,
          headers: echoHeaders(url),
        },
        (answer) => {
          readBody(answer).then((body) => {
            if (answer.statusCode === 200) finish(null, body);
            else finish(new CheckFailure(`${url} answered HTTP ${answer.statusCode} through the tunnel`));
          }, finish);
        },
      );
      request.on('error', (error) => finish(new CheckFailure(`${url} through the tunnel: ${error.message}`)));
      request.end();
    });
  }

  /** The whoami question over DoH, through the tunnel: TLS with the resolver's certificate checked. */
  private async whoamiOverDoh(proxyPort: number, dohUrl: string, name: string, timeoutMs: number) {
    const what = `the lookup of ${name} over DoH through the tunnel`;
    const until = Date.now() + timeoutMs;
    const url = new URL(dohUrl);
    try {
      const socket = await connectThrough(
        proxyPort,
        url.hostname,
        Number(url.port || 443),
        timeoutMs,
        url.host,
      );
      const reply = await askDoh(dohUrl, encodeQuery(name, 'TXT', true), {
        trust: trustFor(this.plan, dohUrl),
        timeoutMs: until - Date.now(),
        socket,
      });
      return decodeReply(reply, undefined, what);
    } catch (error) {
      return decodeReply(undefined, (error as Error).message, what);
    }
  }

  /**
   * The DNS path: with a probe, a fresh name under its zone must reach the probe from the exit only (its log read
   * over HTTPS); the whoami name asked over DoH through the tunnel, and of the tunnel's own DNS, must come back
   * with the exit address.
   */
  private async dnsPath(
    checks: Checks,
    ports: { proxyPort: number; dnsPort: number },
    declaredIp: string,
    observedExit: string | null,
    ends: number,
  ) {
    // Asked from the very exit the IP echoes saw, a lookup did not leak: the declared exit IP is what is wrong.
    const leakOrMismatch = (message: string, asker: string | null) =>
      asker && observedExit && sameAddress(asker, observedExit) && !sameAddress(asker, declaredIp)
        ? new CheckFailure(
            `not a leak: the lookup left from ${asker}, the exit the IP echoes saw, so the upstream leaves from ${asker} and the declared exit IP ${declaredIp} looks wrong`,
          )
        : new CheckFailure(`DNS leaked: ${message}`);
    const budget = () => Math.min(this.dnsTimeoutMs, ends - Date.now());
    const resolver = tunnelResolver(ports.dnsPort);
    // resolver_ip: the first asker a resolver saw, or the one that failed the check.
    const judge = (reply: DnsReply, name: string, via: 'doh' | 'tunnel') => {
      const seen = reply.ok ? (txtText(reply.packet)?.trim() ?? null) : null;
      checks.dns_leak.resolver_ip ??= seen;
      const verdict = whoamiVerdict(reply, name, declaredIp, via);
      if (verdict?.code === 'dns_leak') {
        checks.dns_leak.resolver_ip = seen;
        throw leakOrMismatch(verdict.message, seen);
      }
      if (verdict) throw new CheckFailure(verdict.message);
    };
    try {
      const { probe, whoami } = this.plan;
      if (probe) {
        const name = probeLeakName(probe);
        const what = `the lookup of ${name} through the tunnel`;
        const reply = await askResolver(resolver, encodeQuery(name, 'A'), budget(), what);
        if (!reply.ok) throw new CheckFailure(reply.error);
        const seen = await readProbeLog(probe, name, {
          trust: trustFor(this.plan, probe.url),
          timeoutMs: budget(),
        });
        checks.dns_leak.resolver_ip = seen.find((address) => address !== declaredIp) ?? seen[0] ?? null;
        const verdict = probeLogVerdict(seen, name, declaredIp);
        if (verdict) throw leakOrMismatch(verdict.message, seen.length === 1 ? seen[0]! : null);
      }
      if (whoami) {
        judge(
          await this.whoamiOverDoh(ports.proxyPort, whoami.dohUrl, whoami.name, budget()),
          whoami.name,
          'doh',
        );
        const what = `the lookup of ${whoami.name} through the tunnel`;
        const reply = await askResolver(resolver, encodeQuery(whoami.name, 'TXT', true), budget(), what);
        judge(reply, whoami.name, 'tunnel');
      }
      checks.dns_leak.ok = true;
    } catch (error) {
      checks.dns_leak.error =
        error instanceof CheckError || error instanceof Error ? error.message : String(error);
    }
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

/** A TCP connection to `address:port` through the tunnel's HTTP proxy (CONNECT); `what` names it in errors. */
function connectThrough(
  proxyPort: number,
  address: string,
  port: number,
  timeoutMs: number,
  what: string,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const connect = http.request({
      host: '127.0.0.1',
      port: proxyPort,
      method: 'CONNECT',
      path: `${address}:${port}`,
      headers: { host: `${address}:${port}` },
      agent: false,
    });
    const timer = setTimeout(
      () => {
        connect.destroy();
        reject(new CheckFailure('timeout'));
      },
      Math.max(0, timeoutMs),
    );
    connect.on('connect', (response, socket) => {
      clearTimeout(timer);
      // The request lets go of the socket it hands over; its failures reach the TLS on top of it.
      socket.on('error', () => {});
      if (response.statusCode === 200) return resolve(socket);
      socket.destroy();
      reject(new CheckFailure(`the tunnel could not reach ${what} (HTTP ${response.statusCode})`));
    });
    connect.on('error', (error) => {
      clearTimeout(timer);
      reject(new CheckFailure(`no connection through the tunnel: ${error.message}`));
    });
    connect.end();
  });
}

/** The DNS inbound of the test's tunnel, on this machine. */
const tunnelResolver = (port: number) => ({ address: '127.0.0.1', port });

/** The tester for the configured endpoints. */
export function egressTesterFor(settings: EgressSettings, engine: TunnelEngine): EgressTester {
  return new TunnelEgressTester({ engine, settings });
}
