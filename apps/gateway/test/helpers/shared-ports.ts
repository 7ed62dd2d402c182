import { execFile } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import { linuxUserFor } from '../../src/domain/hosts/host-view.js';
import { type LabGateway, startLabGateway } from './lab-gateway.js';

const exec = promisify(execFile);
const APP = readFileSync(new URL('./share-app.py', import.meta.url), 'utf8');
/** The port the app listens on inside the workspace (on loopback only: the share reaches it from inside). */
export const APP_PORT = 3000;

/** `count` consecutive ports free on 127.0.0.1 a moment ago: SHARE_PORTS for one test gateway. */
export async function freePortRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = randomInt(20_000, 60_000);
    const servers: net.Server[] = [];
    let free = true;
    for (let port = first; port < first + count && free; port++) {
      const server = net.createServer();
      free = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(port, '127.0.0.1', () => resolve(true));
      });
      if (free) servers.push(server);
    }
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
    if (free) return first;
  }
  throw new Error('no free range of ports on 127.0.0.1');
}

export interface SharedPortHost {
  lab: LabGateway;
  /** The first port of SHARE_PORTS. */
  firstSharePort: number;
  owner: { id: string; token: string; username: string };
  friend: { id: string; token: string; username: string };
  stranger: { id: string; token: string; username: string };
  host: { id: string; short_id: string };
  /** Writes a file the app serves at `/<name>`. */
  writePage(name: string, content: string): Promise<void>;
  /** A one-time entry URL of a share for a user (POST …/shares/{id}/ticket on their portal). */
  ticketUrl(shareId: string, token: string, portal?: 'user' | 'admin'): Promise<string>;
  close(): Promise<void>;
}

/**
 * A gateway sharing ports on SHARE_PORTS (public host 127.0.0.1, as the dashboard is reached, so a share is
 * same-site with it), a running workspace of `owner`, and the test app listening in it as the owner's user.
 */
export async function startSharedPortHost(
  env: Record<string, string> = {},
  options = {},
): Promise<SharedPortHost> {
  const firstSharePort = await freePortRange(3);
  const lab = await startLabGateway(
    { SHARE_PORTS: `${firstSharePort}-${firstSharePort + 2}`, PUBLIC_HOST: '127.0.0.1', ...env },
    'sqlite',
    options,
  );
  const suffix = randomBytes(3).toString('hex');
  const account = async (name: string) => ({
    ...(await lab.t.createUser(`${name}${suffix}`)),
    username: `${name}${suffix}`,
  });
  const owner = await account('own');
  const friend = await account('friend');
  const stranger = await account('stranger');
  const host = await lab.createHost(owner.id);
  await lab.startHost(host.id);
  const container = `ccp-ws-${host.id}`;
  const user = linuxUserFor(owner.username);
  const site = '/tmp/share-site';
  const inWorkspace = (script: string, input?: string) => {
    const child = exec('docker', ['exec', '-i', '-u', user, container, 'sh', '-c', script]);
    child.child.stdin?.end(input ?? '');
    return child;
  };
  await inWorkspace(`mkdir -p ${site} && cat > /tmp/share-app.py`, APP);
  await exec('docker', [
    'exec',
    '-d',
    '-u',
    user,
    container,
    'python3',
    '/tmp/share-app.py',
    String(APP_PORT),
    site,
  ]);
  const shared: SharedPortHost = {
    lab,
    firstSharePort,
    owner,
    friend,
    stranger,
    host,
    async writePage(name, content) {
      await inWorkspace(`cat > ${site}/${name}`, content);
    },
    async ticketUrl(shareId, token, portal = 'user') {
      const ticket = await lab.t.request('POST', `/v1/${portal}/shares/${shareId}/ticket`, { token });
      if (ticket.status !== 200) throw new Error(`ticket: ${ticket.status} ${JSON.stringify(ticket.body)}`);
      return ticket.body.url as string;
    },
    close: () => lab.close(),
  };
  // The app is up once the workspace lists its port.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ports = await lab.t.request('GET', `/v1/user/hosts/${host.id}/ports`, { token: owner.token });
    if (ports.status === 200 && ports.body.items.some((p: { port: number }) => p.port === APP_PORT)) break;
    if (Date.now() > deadline) throw new Error(`the app did not listen: ${JSON.stringify(ports.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return shared;
}

/** The text of `#out` once the app's page wrote it (its script's result). */
export async function pageResult(page: Page, ms = 20_000): Promise<string> {
  await page.waitForFunction("document.getElementById('out')?.textContent", undefined, { timeout: ms });
  return (await page.textContent('#out')) ?? '';
}

/** Waits until the page's WebSocket (ECHO_PAGE) has closed. */
export async function socketClosed(page: Page, ms: number): Promise<void> {
  await page.waitForFunction("window.socketState === 'closed'", undefined, { timeout: ms });
}

/** A page of the app whose script opens the WebSocket at /ws, sends `ping` and shows what came back. */
export const ECHO_PAGE = `<!doctype html><title>shared app</title><p id="hello">hello from the workspace</p><p id="out"></p>
<script>
const socket = new WebSocket(location.origin.replace(/^http/, 'ws') + '/ws');
window.socketState = 'connecting';
socket.onopen = () => { window.socketState = 'open'; socket.send('ping'); };
socket.onmessage = (event) => { document.getElementById('out').textContent = event.data; };
socket.onclose = () => { window.socketState = 'closed'; };
</script>`;

export type { Browser };
