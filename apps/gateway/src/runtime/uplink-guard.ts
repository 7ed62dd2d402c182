import { readdir, readFile, readlink } from 'node:fs/promises';
import path from 'node:path';
import { renderUplinkGuard, type UplinkPolicy } from '../egress/uplink-guard.js';
import { UPLINK_NETWORK } from './container-specs.js';
import { GATEWAY_NETWORK } from './egress-gateway-files.js';
import { CommandError, run } from './netns.js';
import { RuntimeError } from './workspace-runtime.js';

const HOST_NET = '/sys/class/net';

const tableOf = (hostId: string) => `ccp_uplink_${hostId}`;

/**
 * Loads (or replaces, atomically) the host-side guard on an egress gateway's uplink port: the kill switch where
 * nothing in the gateway can undo it. Called before a workspace is linked to the gateway and whenever its
 * upstream changes, so no byte of the workspace's ever reaches a gateway whose port is not guarded.
 */
export async function guardUplink(
  hostId: string,
  gateway: { pid: number; uplinkAddress: string },
  policy: UplinkPolicy,
): Promise<void> {
  const port = await uplinkPort(gateway.pid);
  try {
    await run('nft', ['-f', '-'], {
      input: renderUplinkGuard({
        table: tableOf(hostId),
        device: port.device,
        mac: port.mac,
        address: gateway.uplinkAddress,
        policy,
      }),
    });
  } catch (error) {
    throw new RuntimeError(
      'network_setup_failed',
      `cannot guard the egress gateway's uplink on this machine: ${(error as Error).message}`,
    );
  }
}

/**
 * Removes the guard of a host whose gateway is gone or stopped; nothing to do when there is none (no such table,
 * or no nft on a machine that never guarded anything), so a stop never fails for it.
 */
export async function releaseUplink(hostId: string): Promise<void> {
  await run('nft', ['delete', 'table', 'netdev', tableOf(hostId)]).catch((error: unknown) => {
    const absent =
      error instanceof CommandError &&
      (/No such file or directory/.test(error.stderr) || /ENOENT/.test(error.message));
    if (!absent) throw error;
  });
}

/**
 * The host's end of the gateway's uplink veth, and the gateway's MAC on it, read from sysfs without starting a
 * program: the container's own sysfs (its namespace's view) names the peer's index, the host's names the port.
 */
async function uplinkPort(gatewayPid: number): Promise<{ device: string; mac: string }> {
  const inside = `/proc/${gatewayPid}/root/sys/class/net/${GATEWAY_NETWORK.uplinkInterface}`;
  const read = (file: string) =>
    readFile(file, 'utf8').then(
      (text) => text.trim(),
      () => '',
    );
  const [peerIndex, mac] = await Promise.all([
    read(path.join(inside, 'iflink')),
    read(path.join(inside, 'address')),
  ]);
  for (const device of peerIndex && mac ? await readdir(HOST_NET) : []) {
    if ((await read(path.join(HOST_NET, device, 'ifindex'))) !== peerIndex) continue;
    const master = await readlink(path.join(HOST_NET, device, 'master')).catch(() => '');
    if (path.basename(master) === UPLINK_NETWORK) return { device, mac };
  }
  throw new RuntimeError(
    'network_setup_failed',
    `the egress gateway's ${GATEWAY_NETWORK.uplinkInterface} has no port on the ${UPLINK_NETWORK} bridge`,
  );
}
