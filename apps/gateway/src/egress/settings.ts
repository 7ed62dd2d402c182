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
   * A TXT name in class CH that `dnsServer` answers with the asker's address (EGRESS_DNS_WHOAMI): proves the
   * tunnel's DNS leaves from the exit. Null turns that check off.
   */
  dnsWhoami: string | null;
  /** IP echo endpoints asked through the tunnel; every one that answers must see the declared exit (EGRESS_EXIT_IP_URLS). */
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
}

/** A self-hosted egress probe (apps/egress-probe): its IP echo, its zone, its DoH and the token of its DNS log. */
export interface EgressProbe {
  url: string;
  dnsZone: string;
  dohUrl: string;
  token: string | null;
}
