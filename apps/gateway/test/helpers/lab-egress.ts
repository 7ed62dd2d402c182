import { spawn } from 'node:child_process';
import path from 'node:path';
import { type LabDescription, labPublicEgressEnv as labStandIns } from '../../../../test/lab/lab.js';
import { type EgressSettings, egressSettingsFrom } from '../../src/config.js';
import { IMAGE_ROOT } from '../../src/runtime/image-inputs.js';

/**
 * No probe of one's own: the public defaults pointed at the lab's stand-ins. A lab built before it had them
 * lets the probe stand in for the resolver (its zone only, no whoami).
 */
export function labPublicEgressEnv(lab: LabDescription): Record<string, string> {
  if (lab.public) return labStandIns(lab);
  return {
    EGRESS_DOH_URL: lab.internet.dohUrl,
    EGRESS_DNS_SERVER: `${lab.internet.dns.address}:${lab.internet.dns.port}`,
    EGRESS_DNS_WHOAMI: 'off',
    EGRESS_EXIT_IP_URLS: `${lab.internet.httpUrl}/ip`,
    EGRESS_TLS_CA_FILE: lab.caCert,
  };
}

/**
 * The gateway's egress settings for the lab with the operator's own probe (the strongest verification): the
 * probe's IP echo (HTTPS, its CA pinned), zone, DoH and log token, beside the lab's stand-ins for the public
 * resolver and IP echoes. Environment variables, exactly as an operator would set them.
 */
export function labEgressEnv(lab: LabDescription): Record<string, string> {
  return {
    ...labPublicEgressEnv(lab),
    EGRESS_PROBE_URL: `${lab.internet.httpsUrl}/ip`,
    EGRESS_PROBE_CA_FILE: lab.caCert,
    EGRESS_PROBE_DNS_ZONE: lab.internet.zone,
    EGRESS_PROBE_DOH_URL: lab.internet.dohUrl,
    EGRESS_PROBE_TOKEN: lab.internet.dnsLogToken,
  };
}

/** The same settings as config.egress, for tests that build the runtime themselves. */
export function labEgressSettings(lab: LabDescription): EgressSettings {
  return egressSettingsFrom(labEgressEnv(lab));
}

/** No probe of one's own: the public defaults, pointed at the lab's stand-ins only through their settings. */
export function labPublicEgressSettings(lab: LabDescription): EgressSettings {
  return egressSettingsFrom(labPublicEgressEnv(lab));
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
    // 'close', not 'exit': the tags are on stdout, which a fast (cached) build may still be delivering at exit.
    child.on('close', (code) => {
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
