import { renderUplinkGuard, type UplinkPolicy } from '../egress/uplink-guard.js';
import { UPLINK_NETWORK } from './container-specs.js';
import { GATEWAY_NETWORK } from './egress-gateway-files.js';
import { CommandError, run, runInNetns } from './netns.js';
import { RuntimeError } from './workspace-runtime.js';

interface LinkFacts {
  ifname: string;
  ifindex: number;
  address?: string;
  link_index?: number;
}

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

/** Removes the guard of a host whose gateway is gone or stopped; nothing to do when there is none. */
export async function releaseUplink(hostId: string): Promise<void> {
  await run('nft', ['delete', 'table', 'netdev', tableOf(hostId)]).catch((error: unknown) => {
    if (!(error instanceof CommandError && /No such file or directory/.test(error.stderr))) throw error;
  });
}

/** The host's end of the gateway's uplink veth, and the gateway's MAC on it. */
async function uplinkPort(gatewayPid: number): Promise<{ device: string; mac: string }> {
  const inside = await readLinks(
    runInNetns(gatewayPid, 'ip', ['-j', 'link', 'show', 'dev', GATEWAY_NETWORK.uplinkInterface]),
  );
  const own = inside[0];
  const peer = (await readLinks(run('ip', ['-j', 'link', 'show', 'master', UPLINK_NETWORK]))).find(
    (link) => link.ifindex === own?.link_index,
  );
  if (!own?.address || !peer)
    throw new RuntimeError(
      'network_setup_failed',
      `the egress gateway's ${GATEWAY_NETWORK.uplinkInterface} has no port on the ${UPLINK_NETWORK} bridge`,
    );
  return { device: peer.ifname, mac: own.address };
}

async function readLinks(output: Promise<{ stdout: string }>): Promise<LinkFacts[]> {
  return JSON.parse((await output).stdout) as LinkFacts[];
}
