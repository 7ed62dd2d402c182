import type { EgressPolicy } from '@ccp/api';

/**
 * How the tunnel resolves names and how a path is verified (docs/egress-probe.md). Every endpoint is a setting:
 * the defaults are public ones, tests point them at the network lab's stand-ins.
 */
export interface EgressSettings {
  /** The tunnel's resolver for A/AAAA: DNS-over-HTTPS through the upstream (EGRESS_DOH_URL). */
  dohUrl: string;
  /** The tunnel's resolver for every other record type, over TCP through the upstream (EGRESS_DNS_SERVER). */
  dnsServer: { address: string; port: number };
  /**
   * A TXT name in class CH that the resolvers answer with the asker's address (EGRESS_DNS_WHOAMI). Asked over
   * DoH at `dohUrl` through the tunnel, it proves the resolver sees the exit, in an answer the upstream cannot
   * forge; asked of the tunnel's own DNS (`dnsServer`), that the tunnel's DNS enters the upstream. Null turns
   * both off.
   */
  dnsWhoami: string | null;
  /**
   * IP echo endpoints asked through the tunnel; every one that answers must see the declared exit: the probe's
   * echo first when there is a probe, then EGRESS_EXIT_IP_URLS (or the public defaults).
   */
  exitIpUrls: string[];
  /**
   * How many of them must answer (EGRESS_EXIT_IP_MIN_ANSWERS, default 1): one provider's outage is its own outcome,
   * not a verdict on every upstream.
   */
  minEchoAnswers: number;
  /** The operator's own egress probe (EGRESS_PROBE_*): the strongest verification. Null: public endpoints only. */
  probe: EgressProbe | null;
  caFile: string | null;
  v2rayCommand: string;
  /**
   * What every host's workspace may reach through its upstream (EGRESS_POLICY, JSON; null: everything). Applied
   * when a host starts or switches upstream.
   */
  policy: EgressPolicy | null;
}

/**
 * A self-hosted egress probe (apps/egress-probe): its IP echo (HTTPS), its zone, its DoH, the token of its DNS
 * log, and the CA its certificate must chain to (EGRESS_PROBE_CA_FILE; null: the system's and caFile).
 */
export interface EgressProbe {
  url: string;
  dnsZone: string;
  dohUrl: string;
  token: string | null;
  caFile: string | null;
}
