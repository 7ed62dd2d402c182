/**
 * Attack (issue 31): the browser terminal is a shell in a workspace, opened by a WebSocket whose address carries
 * a one-time ticket. A ticket seen once (a proxy's log, a browser's history) must not open a second terminal, nor
 * a terminal on another host or portal; an API token never goes in its address; and a terminal open when its
 * account is disabled ends, as its SSH sessions do.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';

const skip = labUnavailable() || needs('docker');

interface Opened {
  socket: WebSocket;
  output: () => string;
  closed: Promise<{ code: number; reason: string }>;
}

describe('attack: reusing or redirecting a browser terminal', { skip, timeout: 600_000 }, () => {
  const suffix = randomBytes(3).toString('hex');
  let lab: LabGateway;
  let alice: { id: string; token: string; password: string };
  let running: { id: string; short_id: string };
  let other: { id: string; short_id: string };
  const opened: WebSocket[] = [];

  const ticket = async (hostId: string, body: object = {}, token = alice.token, portal = 'user') => {
    const response = await lab.t.request('POST', `/v1/${portal}/hosts/${hostId}/terminal/ticket`, {
      token,
      body,
    });
    return response;
  };
  const wsUrl = (url: string) =>
    url.replace(/^https?:\/\/[^/]+|^wss?:\/\/[^/]+/, lab.t.url.replace(/^http/, 'ws'));
  /** Opens the WebSocket; resolves once the workspace's terminal answered, or rejects with the HTTP status. */
  const open = (url: string): Promise<Opened> =>
    new Promise((resolve, reject) => {
      const socket = new WebSocket(wsUrl(url));
      opened.push(socket);
      let text = '';
      const closed = new Promise<{ code: number; reason: string }>((done) =>
        socket.on('close', (code, reason) => done({ code, reason: reason.toString() })),
      );
      socket.on('unexpected-response', (_request, response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk));
        response.on('end', () => reject(Object.assign(new Error(body), { status: response.statusCode })));
      });
      socket.on('error', () => {});
      socket.on('message', (data: Buffer) => {
        text += data.toString('utf8');
        resolve({ socket, output: () => text, closed });
      });
    });
  const refusal = (url: string) =>
    open(url).then(
      () => assert.fail('the WebSocket opened'),
      (error: Error & { status?: number }) => ({ status: error.status, body: error.message }),
    );
  const waitFor = async (what: string, check: () => boolean, ms = 20_000) => {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  before(async () => {
    lab = await startLabGateway({ TERMINALS_PER_USER: '2' });
    alice = await lab.t.createUser(`tta${suffix}`);
    running = await lab.createHost(alice.id);
    // Never started: a ticket's host is checked before anything else is.
    other = await lab.createHost(alice.id);
    await lab.startHost(running.id);
  });

  after(async () => {
    for (const socket of opened) socket.terminate();
    await lab?.close();
  });

  it('a ticket opens one terminal once; replayed, it is refused', async () => {
    const issued = await ticket(running.id);
    assert.equal(issued.status, 200, JSON.stringify(issued.body));
    assert.match(issued.body.url, /\/v1\/user\/hosts\/[^/]+\/terminal\/ws\?ticket=ccpt_/);
    for (const part of alice.token.split('.').slice(1)) assert.ok(!issued.body.url.includes(part));
    const first = await open(issued.body.url);
    first.socket.send(Buffer.from('echo first-$((40 + 2))\r'));
    await waitFor('the command output', () => first.output().includes('first-42'));
    const replay = await refusal(issued.body.url);
    assert.equal(replay.status, 401);
    assert.match(replay.body, /unknown, used, expired or for another terminal/);
    first.socket.close();
    await first.closed;
  });

  it('a ticket is good only for its host and portal, and is used up by a wrong try', async () => {
    const issued = await ticket(running.id);
    assert.equal(issued.status, 200);
    // The same ticket on another host's path (the same user's, even): refused, and spent.
    const elsewhere = issued.body.url.replace(running.id, other.id);
    assert.equal((await refusal(elsewhere)).status, 401);
    assert.equal((await refusal(issued.body.url)).status, 401, 'spent by the wrong try');
    // On the admin portal's path: refused.
    const again = await ticket(running.id);
    assert.equal((await refusal(again.body.url.replace('/v1/user/', '/v1/admin/'))).status, 401);
    // Another user cannot have a ticket to alice's host at all.
    const bob = await lab.t.createUser(`ttb${suffix}`);
    assert.equal((await ticket(running.id, {}, bob.token)).status, 404);
    // An API token in the address opens nothing.
    const tokenUrl = `/v1/user/hosts/${running.id}/terminal/ws?token=${alice.token}`;
    assert.equal((await refusal(`ws://gateway${tokenUrl}`)).status, 401);
    // Nor does a ticket of another kind: a desktop ticket.
    const desktop = await lab.t.request('POST', `/v1/user/hosts/${running.id}/vnc/ticket`, {
      token: alice.token,
    });
    const desktopTicket = new URL(desktop.body.url).searchParams.get('ticket');
    const viaDesktop = `ws://gateway/v1/user/hosts/${running.id}/terminal/ws?ticket=${desktopTicket}`;
    assert.equal((await refusal(viaDesktop)).status, 401);
  });

  it('past TERMINALS_PER_USER a ticket is refused with the reason', async () => {
    const one = await open((await ticket(running.id)).body.url);
    const two = await open((await ticket(running.id)).body.url);
    const third = await ticket(running.id);
    assert.equal(third.status, 409);
    assert.equal(third.body.code, 'too_many_terminals');
    assert.match(third.body.error, /2 browser terminals open, the most one user may have; close one/);
    one.socket.close();
    two.socket.close();
    await Promise.all([one.closed, two.closed]);
  });

  it("a disabled user's open terminal ends at once, closed by the revocation (not by the host's stop after it)", async () => {
    const terminal = await open((await ticket(running.id, { session: 'revoked' })).body.url);
    terminal.socket.send(Buffer.from('echo before-$((1 + 1))\r'));
    await waitFor('the command output', () => terminal.output().includes('before-2'));
    const disabled = await lab.t.request('PATCH', `/v1/admin/users/${alice.id}`, {
      body: { status: 'disabled' },
    });
    assert.equal(disabled.status, 200);
    // Disabling also stops the user's hosts, which would end the tmux client too (1000, session_ended): the close
    // must be the revocation's own, 1008 with its reason.
    const closed = await Promise.race([
      terminal.closed,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('still open')), 10_000)),
    ]);
    assert.equal(closed.code, 1008);
    assert.equal(closed.reason, 'user_disabled');
    // The closed event is written in the background: read until it is there.
    const closedEvent = async () =>
      (
        await lab.t.request('GET', `/v1/admin/events?type=terminal.session.closed&host_id=${running.id}`)
      ).body.events.find((event: { data: { session: string } }) => event.data.session === 'revoked');
    let last = await closedEvent();
    for (let tries = 0; !last && tries < 50; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      last = await closedEvent();
    }
    assert.equal(last?.data.reason, 'user_disabled');
    // A new ticket is refused too: the account's tokens are dead.
    assert.equal((await ticket(running.id)).status, 401);
  });
});
