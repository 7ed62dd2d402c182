/**
 * Attack (issue 16): the relay in a host's egress gateway admits the desktop's port from the uplink bridge's
 * address, which is every process on the gateway's machine. With the VNC server's `-SecurityTypes None` that was
 * the desktop itself. Now the VNC server asks for a password that only the gateway holds (it answers for the
 * browser): a direct RFB connection to the relay gets nowhere, while the gateway's own path still works.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import WebSocket from 'ws';
import { needs } from '../../../../test/support/needs.js';
import { UPLINK_NETWORK } from '../../src/runtime/container-specs.js';
import { MessageBytes } from '../../src/vnc/rfb-handshake.js';
import { vncAuthResponse } from '../../src/vnc/vnc-auth.js';
import { openStream } from '../helpers/fake-desktop.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';

const exec = promisify(execFile);
const skip = needs('lab', 'docker');

/** The next `size` bytes, or a failure after 10 s: a desktop that stops answering fails the test, not hangs it. */
function read(bytes: MessageBytes, size: number): Promise<Buffer> {
  return Promise.race([
    bytes.read(size),
    new Promise<never>((_resolve, reject) =>
      setTimeout(() => reject(new Error(`no ${size} bytes within 10 s`)), 10_000).unref(),
    ),
  ]);
}

/** An RFB client up to the server's list of security types. */
async function offered(url: string): Promise<{ socket: WebSocket; bytes: MessageBytes; types: number[] }> {
  const socket = new WebSocket(url, ['binary'], { handshakeTimeout: 10_000 });
  // Listening from the start: the banner may come in one piece with the upgrade's answer.
  const bytes = new MessageBytes(socket, 'desktop');
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  assert.equal((await read(bytes, 12)).toString('latin1'), 'RFB 003.008\n');
  socket.send(Buffer.from('RFB 003.008\n'));
  const count = (await read(bytes, 1))[0]!;
  return { socket, bytes, types: [...(await read(bytes, count))] };
}

/** What the server answers after the client's choice: the security result, or none (closed or silent). */
async function outcome(bytes: MessageBytes): Promise<string> {
  try {
    const result = (await read(bytes, 4)).readUInt32BE(0);
    return result === 0 ? 'admitted' : 'refused';
  } catch {
    return 'no answer';
  }
}

describe('attack: connecting to a desktop through its relay, around the gateway', {
  skip,
  timeout: 600_000,
}, () => {
  let lab: LabGateway;
  let hostId: string;
  let user: { id: string; token: string };
  let relay: string;

  before(async () => {
    lab = await startLabGateway();
    user = await lab.t.createUser(`relay${randomBytes(3).toString('hex')}`);
    hostId = (await lab.createHost(user.id)).id;
    await lab.startHost(hostId);
    for (const deadline = Date.now() + 30_000; ; ) {
      const status = await lab.t.request('GET', `/v1/admin/hosts/${hostId}/vnc/status`);
      if (status.body.status === 'running') break;
      if (Date.now() > deadline) throw new Error(`the desktop is ${JSON.stringify(status.body)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const { stdout } = await exec('docker', [
      'inspect',
      '-f',
      `{{(index .NetworkSettings.Networks "${UPLINK_NETWORK}").IPAddress}}`,
      `ccp-egress-${hostId}`,
    ]);
    relay = `ws://${stdout.trim()}:6080/websockify`;
  });
  after(() => lab?.close());

  it('offers no way in without the password, and refuses a wrong one', async () => {
    const none = await offered(relay);
    assert.ok(!none.types.includes(1), `security type None is offered: ${none.types}`);
    assert.ok(none.types.includes(2), `VNC authentication is offered: ${none.types}`);
    none.socket.send(Buffer.from([1]));
    assert.notEqual(await outcome(none.bytes), 'admitted', 'None chosen anyway');
    none.socket.terminate();

    const guess = await offered(relay);
    guess.socket.send(Buffer.from([2]));
    const challenge = await read(guess.bytes, 16);
    guess.socket.send(vncAuthResponse('password', challenge));
    assert.notEqual(await outcome(guess.bytes), 'admitted', 'a guessed password');
    guess.socket.terminate();
  });

  it("still opens through the gateway, which answers the desktop's password itself", async () => {
    const stream = await openStream(
      `${lab.t.url.replace('http', 'ws')}/v1/user/hosts/${hostId}/vnc/websockify`,
      { authorization: `Bearer ${user.token}` },
    );
    assert.ok('socket' in stream, JSON.stringify(stream));
    const bytes = new MessageBytes(stream.socket, 'gateway');
    stream.socket.send(Buffer.from([1])); // ClientInit: shared
    const init = await read(bytes, 24);
    assert.deepEqual([init.readUInt16BE(0), init.readUInt16BE(2)], [1280, 800]);
    stream.socket.close();
  });
});
