import { GATEWAY_NETWORK, WORKSPACE_LINK, WORKSPACE_PORTS } from './egress-gateway-files.js';
import { runInNetns } from './netns.js';

/**
 * A rate limit on a host's traffic through its upstream, set with `tc` in its egress gateway's network namespace,
 * which the workspace cannot reach. Each way is shaped where it leaves the gateway: towards the workspace on
 * its link (what it receives) and towards the upstream on the uplink (what it sends). The relay's traffic (SSH
 * sessions, the desktop) is classed apart and keeps its speed, so a throttled host stays usable.
 * (Policing what arrives would need tc's action modules, which not every kernel has.)
 */
const LIMITED = '1:20';
const FREE = '1:10';
/** The kernel's usual largest offload segment, which a lifted limit gives back. */
const FULL_GSO = 65536;

const ways = [
  // To the workspace: the relay's packets go to its services' ports.
  { device: WORKSPACE_LINK.gatewayInterface, relayMatch: 'dport' },
  // To the upstream and the SSH proxy: the relay's answers come from the same port numbers.
  { device: GATEWAY_NETWORK.uplinkInterface, relayMatch: 'sport' },
] as const;

/** `ip -batch` and `tc -batch` lines that shape both ways to `bytesPerSecond`. */
function shapingCommands(bytesPerSecond: number): { ip: string; tc: string } {
  const ip: string[] = [];
  const tc: string[] = [];
  // A burst of about a tenth of a second, never below what a few full-size packets need.
  const burst = Math.max(4 * 1024, Math.round(bytesPerSecond / 10));
  for (const { device, relayMatch } of ways) {
    // Offload segments no larger than the burst: one of 64 KiB would overshoot a small rate by itself.
    ip.push(`link set dev ${device} gso_max_size ${Math.min(burst, FULL_GSO)}`);
    tc.push(`qdisc add dev ${device} root handle 1: htb default 20`);
    tc.push(`class add dev ${device} parent 1: classid ${FREE} htb rate 10gbit quantum 60000`);
    tc.push(
      `class add dev ${device} parent 1: classid ${LIMITED} htb rate ${bytesPerSecond}bps burst ${burst}`,
    );
    for (const port of Object.values(WORKSPACE_PORTS))
      tc.push(
        `filter add dev ${device} parent 1: protocol ip prio 1 u32 match ip ${relayMatch} ${port} 0xffff flowid ${FREE}`,
      );
  }
  return { ip: `${ip.join('\n')}\n`, tc: `${tc.join('\n')}\n` };
}

async function shaped(gatewayPid: number): Promise<boolean> {
  const device = WORKSPACE_LINK.gatewayInterface;
  const { stdout } = await runInNetns(gatewayPid, 'tc', ['qdisc', 'show', 'dev', device]);
  return /\bqdisc htb 1: root\b/.test(stdout);
}

async function lift(gatewayPid: number): Promise<void> {
  for (const { device } of ways) {
    await runInNetns(gatewayPid, 'tc', ['qdisc', 'del', 'dev', device, 'root']).catch(() => undefined);
    await runInNetns(gatewayPid, 'ip', [
      'link',
      'set',
      'dev',
      device,
      'gso_max_size',
      String(FULL_GSO),
    ]).catch(() => undefined);
  }
}

/**
 * Holds the gateway's traffic to `bytesPerSecond` each way (null lifts it). `applied` is the rate set last on
 * this gateway: with the same rate, the limit is only checked for (a relinked workspace has a new link).
 */
export async function throttleGateway(
  gatewayPid: number,
  bytesPerSecond: number | null,
  applied: number | null,
): Promise<void> {
  if (bytesPerSecond === null) return lift(gatewayPid);
  if (applied === bytesPerSecond && (await shaped(gatewayPid))) return;
  await lift(gatewayPid);
  const commands = shapingCommands(bytesPerSecond);
  await runInNetns(gatewayPid, 'ip', ['-batch', '-'], { input: commands.ip });
  await runInNetns(gatewayPid, 'tc', ['-batch', '-'], { input: commands.tc });
}
