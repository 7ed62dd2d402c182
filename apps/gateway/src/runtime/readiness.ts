import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { GATEWAY_NETWORK } from './egress-gateway-files.js';
import { listensOnTcp } from './netns.js';

/** When the processes in a host's containers are ready, seen from outside them (no exec into a container). */

export const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The egress gateway's current v2ray PID, read from its file system through /proc. */
export async function v2rayPid(gatewayPid: number): Promise<number | null> {
  const text = await readFile(`/proc/${gatewayPid}/root/run/ccp-egress/v2ray.pid`, 'utf8').catch(() => '');
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/**
 * Whether the egress gateway whose init is `gatewayPid` has loaded its kill switch and runs a v2ray that
 * listens (another than `previousV2ray`, after a reload), its DNS included, and the workspace's resolver, the
 * DNS filter that starts beside v2ray, answers. Only then may a workspace be linked to it: a lookup the workspace
 * makes at once (the check as its user) must find neither port 53 nor v2ray's DNS closed.
 */
export async function tunnelReady(gatewayPid: number, previousV2ray: number | null): Promise<boolean> {
  const pid = await v2rayPid(gatewayPid);
  return (
    pid !== null &&
    pid !== previousV2ray &&
    (await listensOnTcp(gatewayPid, GATEWAY_NETWORK.transparentPort)) &&
    (await listensOnTcp(gatewayPid, GATEWAY_NETWORK.filteredDnsPort)) &&
    (await listensOnTcp(gatewayPid, GATEWAY_NETWORK.dnsPort))
  );
}

/**
 * Whether a workspace's entrypoint is past its set-up (user, home, host key): the child of its docker-init
 * `initPid` runs sshd, or the container's init is gone.
 */
export async function entrypointDone(initPid: number): Promise<boolean> {
  const children = await readFile(`/proc/${initPid}/task/${initPid}/children`, 'utf8').catch(() => null);
  if (children === null) return true;
  const [child] = children.trim().split(' ');
  if (!child) return false;
  const command = await readFile(`/proc/${child}/comm`, 'utf8').catch(() => '');
  return command.trim() === 'sshd';
}

/** One attempt: whether `host:port` sends an SSH banner within a second. */
export function sshBanner(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let banner = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on('data', (chunk: Buffer) => {
      banner += chunk.toString('latin1');
      if (banner.length >= 4) done(banner.startsWith('SSH-'));
    });
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
  });
}
