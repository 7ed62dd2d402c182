import type { EgressPolicy, ProxyConfig } from '@ccp/api';

/** A validated upstream whose `server` the caller has already resolved. */
export interface ResolvedUpstream {
  config: ProxyConfig;
  /**
   * IP literal of `config.server`. The engine never resolves names itself: inside the egress gateway its own
   * resolver is the tunnel, which would need the upstream to answer.
   */
  serverIp: string;
}

export interface SocketAddress {
  address: string;
  port: number;
}

/** How the tunnel answers DNS: only ever through the upstream. */
export interface TunnelDnsSettings {
  /** DNS-over-HTTPS endpoint (https://…/dns-query) that answers A and AAAA through the tunnel. */
  dohUrl: string;
  /** Resolver asked over TCP through the tunnel for every other record type (TXT, MX, SRV…). */
  tcpResolver: SocketAddress;
  /** Zones whose A/AAAA go to their own DoH endpoint instead (the egress probe's zone, so it sees who asks). */
  zones?: { zone: string; dohUrl: string }[];
}

/** The long-running tunnel in a host's egress gateway. */
export interface GatewayConfigParams {
  upstream: ResolvedUpstream;
  /** SO_MARK on the upstream socket; the kill switch lets only this mark out. */
  socketMark: number;
  /** TPROXY port receiving the workspace's TCP and UDP. */
  transparentPort: number;
  /** Where the workspace's DNS is answered (the gateway's address on the workspace link). */
  dnsListen: SocketAddress;
  dns: TunnelDnsSettings;
  /** Recover host names from HTTP Host and TLS SNI so the exit, not the gateway, picks the address. */
  sniffing: boolean;
  /**
   * Loopback port of the engine's counters of bytes through the upstream (read by `counterCommand`); none
   * without it.
   */
  countersPort?: number;
  /** What the workspace may reach (v2ray-policy.ts); everything without it. */
  policy?: EgressPolicy;
}

/** Bytes through the upstream since the counters were last read (reading resets them). */
export interface UpstreamCounters {
  /** From the workspace to the upstream (its own bytes, before the upstream protocol's framing). */
  sent: number;
  /** From the upstream to the workspace. */
  received: number;
}

/** What an egress policy did with a connection: refused it (`enforce`), or let it through (`log-only`). */
export type PolicyDecision = 'blocked' | 'would_block';

/** How often the policy decided one way about one destination within one minute (`minute`: its start). */
export interface DecisionCount {
  minute: string;
  decision: PolicyDecision;
  /** A DNS name (lower case) or an IP address. */
  destination: string;
  port: number;
  count: number;
  lastSeen: string;
}

/** The decisions read from an egress gateway's log since the last reading. */
export interface ReadDecisions {
  counts: DecisionCount[];
  /** Lines of the policy's that named no plausible destination (never stored). */
  refused: number;
  /** The log had filled its space since the last reading: decisions after that were lost. */
  overflowed: boolean;
}

/** The short-lived tunnel the control plane's egress test talks through. */
export interface TestConfigParams {
  upstream: ResolvedUpstream;
  /** Loopback proxy the probe connects through. */
  probeInbound: { protocol: 'socks' | 'http'; port: number };
  /** Loopback port answering DNS through the tunnel, for the leak check. */
  dnsPort: number;
  dns: TunnelDnsSettings;
}

/** Where the engine sends upstream traffic: the only destination the kill switch lets out. */
export interface UpstreamEndpoint {
  address: string;
  port: number;
  protocols: readonly ('tcp' | 'udp')[];
}

/** The seam between egress code and the tunnel program, so another engine (sing-box) can replace v2ray. */
export interface TunnelEngine {
  readonly name: string;
  /** Executable used when the settings name no other. */
  readonly defaultCommand: string;
  /** Arguments that run the engine with its config read from stdin, which keeps secrets off disk. */
  readonly runArgs: readonly string[];
  /** Arguments that only check a config read from stdin; exit status 0 means it was accepted. */
  readonly checkArgs: readonly string[];
  upstreamEndpoint(upstream: ResolvedUpstream): UpstreamEndpoint;
  renderGatewayConfig(params: GatewayConfigParams): string;
  renderTestConfig(params: TestConfigParams): string;
  /**
   * The program and arguments, run in the gateway's network and mount namespaces, that print the upstream's
   * counters and reset them; `parseCounters` reads what it printed.
   */
  counterCommand(port: number): readonly string[];
  parseCounters(output: string): UpstreamCounters;
  /**
   * The file in the egress gateway where the engine logs its policy's decisions (while the policy records
   * them), read and emptied by the runtime; `parseDecisions` reads its text.
   */
  readonly decisionLogPath: string;
  parseDecisions(text: string, readAt: Date): ReadDecisions;
}
