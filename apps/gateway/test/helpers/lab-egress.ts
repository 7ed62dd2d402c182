import type { LabDescription } from '../../../../test/lab/lab.js';

/** The gateway's egress settings pointed at the lab's probe. */
export function labEgressEnv(lab: LabDescription): Record<string, string> {
  return {
    EGRESS_PROBE_URL: `${lab.internet.httpUrl}/ip`,
    EGRESS_PROBE_DNS_ZONE: lab.internet.zone,
    EGRESS_PROBE_DNS_SERVER: `${lab.internet.dns.address}:${lab.internet.dns.port}`,
    EGRESS_DOH_URL: lab.internet.dohUrl,
    EGRESS_PROBE_TOKEN: lab.internet.dnsLogToken,
    EGRESS_TLS_CA_FILE: lab.caCert,
  };
}
