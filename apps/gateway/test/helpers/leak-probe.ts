/**
 * Runs runtime/leak-probe.pl's escape attempts where an attacker would: inside a workspace (as its user, or root
 * through sudo), or as root in an egress gateway's network namespace. Also: the takeover of an egress gateway,
 * what a v2ray taken over by the workspace's bytes could do there.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { GATEWAY_NETWORK, WORKSPACE_LINK } from '../../src/runtime/egress-gateway-files.js';

const exec = promisify(execFile);
const PROBE = readFileSync(new URL('../runtime/leak-probe.pl', import.meta.url), 'utf8');

export type Actor = 'user' | 'root';

/** One attempt for leak-probe.pl (see its kinds). */
export interface ProbeAttempt {
  id: string;
  kind: string;
  [parameter: string]: unknown;
}

export interface ProbeResult {
  id: string;
  ok: boolean;
  error?: string;
  reply?: string;
  detail?: string;
}

export async function dockerCli(args: string[]): Promise<string> {
  const { stdout } = await exec('docker', args, { timeout: 30_000, maxBuffer: 4 << 20 });
  return stdout;
}

/** Runs attempts inside the workspace, `docker exec` as its user and, for root, through sudo. */
export async function probeInWorkspace(
  container: string,
  linuxUser: string,
  actor: Actor,
  attempts: ProbeAttempt[],
): Promise<Map<string, ProbeResult>> {
  const command = ['perl', '-e', PROBE, JSON.stringify(attempts)];
  const stdout = await dockerCli([
    'exec',
    '--user',
    linuxUser,
    container,
    ...(actor === 'root' ? ['sudo', '-n', ...command] : command),
  ]);
  return probeResults(stdout, attempts, actor);
}

/** Runs attempts as root in the network namespace of `pid` (an egress gateway's, as its own root would). */
export async function probeInNetns(pid: number, attempts: ProbeAttempt[]): Promise<Map<string, ProbeResult>> {
  const { stdout } = await exec(
    'nsenter',
    [`--net=/proc/${pid}/ns/net`, '--', 'perl', '-e', PROBE, JSON.stringify(attempts)],
    { timeout: 30_000, maxBuffer: 4 << 20 },
  );
  return probeResults(stdout, attempts, 'gateway');
}

function probeResults(stdout: string, attempts: ProbeAttempt[], who: string): Map<string, ProbeResult> {
  const results = new Map<string, ProbeResult>();
  for (const line of stdout.split('\n')) {
    if (!line.trim()) continue;
    const result = JSON.parse(line) as ProbeResult;
    results.set(result.id, result);
  }
  for (const attempt of attempts)
    assert.ok(results.has(attempt.id), `leak-probe.pl gave no result for ${attempt.id} (${who})`);
  return results;
}

/**
 * Undoes an egress gateway's own kill switch from inside, as root with NET_ADMIN there could: flushes its
 * ruleset (from the container itself), turns forwarding on and masquerades the workspace out of the uplink, and
 * takes another address of the uplink bridge (a neighbour gateway's, or one nobody has) so its replies and ARP
 * come back. Returns that spoofed address.
 */
export async function takeOverGateway(gateway: {
  name: string;
  pid: number;
  uplinkAddress: string;
}): Promise<{ spoofed: string }> {
  const inNetns = (argv: string[]) =>
    exec('nsenter', [`--net=/proc/${gateway.pid}/ns/net`, '--', ...argv], { timeout: 10_000 });
  const spoofed = gateway.uplinkAddress.replace(/\.\d+$/, (last) => (last === '.250' ? '.251' : '.250'));
  await dockerCli(['exec', gateway.name, 'nft', 'flush', 'ruleset']);
  await inNetns(['sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  await inNetns([
    'nft',
    'add table ip taken; add chain ip taken out { type nat hook postrouting priority srcnat; }; ' +
      `add rule ip taken out oifname "${GATEWAY_NETWORK.uplinkInterface}" ip saddr ${WORKSPACE_LINK.workspaceAddress} masquerade`,
  ]);
  await inNetns(['ip', 'addr', 'add', `${spoofed}/32`, 'dev', GATEWAY_NETWORK.uplinkInterface]);
  return { spoofed };
}
