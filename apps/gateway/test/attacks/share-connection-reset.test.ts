/**
 * Attack: a visitor of a shared port resets their connection in the middle of a WebSocket or of an upload. Shares
 * are held to SHARE_BYTES_PER_SECOND by default, and the limiter passed the socket's `read ECONNRESET` (or the
 * request's `aborted`) on as an error nobody listened to: the gateway process died, for every user, on one reset
 * any visitor can send (and Chromium sends when a tab closes at the wrong moment).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { eventsOf } from '../helpers/expect.js';
import { rawRequest } from '../helpers/raw-http.js';
import { APP_PORT, ECHO_PAGE, type SharedPortHost, startSharedPortHost } from '../helpers/shared-ports.js';

const skip = labUnavailable();

/** Opens the share's WebSocket with its pass and resolves once the app's 101 came back. */
function openSocket(origin: string, cookie: string): Promise<net.Socket> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let answer = '';
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (!answer.includes('\r\n\r\n')) return;
      socket.removeAllListeners('data');
      if (answer.startsWith('HTTP/1.1 101')) resolve(socket);
      else reject(new Error(`no upgrade: ${answer.split('\r\n')[0]}`));
    });
    socket.write(
      'GET /ws HTTP/1.1\r\n' +
        `Host: ${new URL(origin).host}\r\nOrigin: ${origin}\r\nCookie: ${cookie}\r\n` +
        'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n' +
        `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
    );
  });
}

/**
 * Sends the head of an upload and part of its body (within the limiter's budget, so it is read at once) through
 * the share, to the app's upload form that reads it whole before answering; then resets the connection.
 */
function resetMidUpload(origin: string, cookie: string): Promise<void> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(
        'POST /upload HTTP/1.1\r\n' +
          `Host: ${new URL(origin).host}\r\nOrigin: ${origin}\r\nCookie: ${cookie}\r\n` +
          'Content-Type: application/octet-stream\r\nContent-Length: 1048576\r\n\r\n',
      );
      socket.write(Buffer.alloc(64 * 1024, 1));
      setTimeout(() => {
        socket.resetAndDestroy();
        resolve();
      }, 300);
    });
    socket.on('error', reject);
  });
}

describe('attack: a share visitor resetting a WebSocket or an upload', { skip, timeout: 900_000 }, () => {
  let s: SharedPortHost;
  // The gateway runs in this process: an error nobody handles there is the one that ends a real gateway.
  const unhandled: Error[] = [];
  const collect = (error: Error) => unhandled.push(error);

  before(async () => {
    process.on('uncaughtException', collect);
    s = await startSharedPortHost({ SHARE_BYTES_PER_SECOND: '1048576' });
    await s.writePage('index.html', ECHO_PAGE);
  });
  after(async () => {
    process.off('uncaughtException', collect);
    await s?.close();
  });

  let share: { id: string; origin: string; cookie: string };

  it('ends that WebSocket only: the gateway keeps serving and records the close', async () => {
    const created = await s.lab.t.request('POST', `/v1/user/hosts/${s.host.id}/shares`, {
      token: s.owner.token,
      body: { port: APP_PORT },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const origin = created.body.origin as string;
    const ticket = new URL(await s.ticketUrl(created.body.id, s.owner.token));
    const entered = await rawRequest(origin, `${ticket.pathname}${ticket.search}`);
    assert.equal(entered.status, 303);
    const cookie = String(entered.headers['set-cookie']?.[0] ?? '').split(';')[0]!;
    share = { id: created.body.id, origin, cookie };
    for (let round = 0; round < 5; round++) {
      const socket = await openSocket(origin, cookie);
      // A frame on its way, then the reset (RST) rather than a close: the gateway's read fails with ECONNRESET.
      socket.write(Buffer.from([0x81, 0x84, 1, 2, 3, 4, 0x71, 0x6b, 0x6d, 0x63]));
      socket.resetAndDestroy();
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.deepEqual(unhandled.map(String), []);
    assert.equal((await rawRequest(s.lab.t.url, '/healthz')).status, 200);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const closed = (await eventsOf(s.lab.t, { type: 'port_share.closed' })).filter(
        (event: { data?: { share_id?: string } }) => event.data?.share_id === created.body.id,
      );
      if (closed.length === 5) break;
      assert.ok(Date.now() < deadline, `closes recorded: ${JSON.stringify(closed)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  it('ends an upload reset halfway: the gateway keeps serving its shares', async () => {
    assert.ok(share, 'the first test entered the share');
    for (let round = 0; round < 3; round++) await resetMidUpload(share.origin, share.cookie);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(unhandled.map(String), []);
    assert.equal((await rawRequest(s.lab.t.url, '/healthz')).status, 200);
    const page = await rawRequest(share.origin, '/', { cookie: share.cookie });
    assert.equal(page.status, 200);
    assert.match(page.body, /shared app|WebSocket/);
  });
});
