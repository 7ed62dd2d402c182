import { spawn } from 'node:child_process';
import path from 'node:path';
import type { LabDescription } from '../../../../test/lab/lab.js';
import type { EgressSettings } from '../../src/config.js';
import { IMAGE_ROOT } from '../../src/runtime/image-inputs.js';

/** The gateway's egress settings pointed at the lab's probe, as environment variables. */
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

/** The same settings as config.egress, for tests that build the runtime themselves. */
export function labEgressSettings(lab: LabDescription): EgressSettings {
  return {
    probeUrl: lab.internet.httpUrl,
    dnsZone: lab.internet.zone,
    dnsServer: lab.internet.dns,
    dohUrl: lab.internet.dohUrl,
    probeToken: lab.internet.dnsLogToken,
    caFile: lab.caCert,
    v2rayCommand: 'v2ray',
  };
}

/** image/build.sh for the test variant (a no-op when the tags exist); returns its tags. */
export function buildTestImages(): Promise<{ workspace: string; egressGateway: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(IMAGE_ROOT, 'build.sh'), '--variant', 'test', 'all'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      const tags = new Map(
        [...stdout.matchAll(/^image ([\w-]+)=(\S+)$/gm)].map((match) => [match[1], match[2]] as const),
      );
      const workspace = tags.get('workspace');
      const egressGateway = tags.get('egress-gateway');
      if (code !== 0 || !workspace || !egressGateway) reject(new Error(`image/build.sh failed (${code})`));
      else resolve({ workspace, egressGateway });
    });
  });
}
