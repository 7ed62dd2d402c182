import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { SseHub } from '../../src/events/sse-hub.js';
import { SseClient } from '../helpers/sse-client.js';

describe('SSE hub back-pressure', () => {
  let hub: SseHub;
  let server: http.Server;
  let port = 0;

  before(async () => {
    hub = new SseHub({ maxPendingBytes: 64 * 1024, heartbeatMs: 60_000 });
    server = http.createServer((_req, res) =>
      hub.attach(
        res,
        { role: 'admin', userId: 'u', topics: new Set(['hosts']), tokenVersion: 1, expiresAt: null },
        null,
      ),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  after(async () => {
    hub.closeAll();
    await new Promise((resolve) => server.close(resolve));
  });

  it('drops a client that stops reading and keeps serving the others', async () => {
    // A raw socket that never reads: its receive window fills, then the server-side buffer grows.
    const stalled = net.connect(port, '127.0.0.1');
    stalled.write('GET / HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n');
    stalled.pause();
    const reader = await SseClient.open(`http://127.0.0.1:${port}/`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(hub.size, 2);

    // Publish at the pace of the reading client until the stalled one has been dropped (bounded).
    const payload = 'x'.repeat(16 * 1024);
    let sent = 0;
    while (hub.droppedSlowClients === 0 && sent < 2000) {
      hub.publish({ topic: 'hosts', action: 'update', id: String(sent), payload }, null);
      sent++;
      await reader.waitFor((c) => c.messages().length === sent, 5000);
    }
    assert.ok(sent < 2000, 'the stalled client was never dropped');
    assert.equal(hub.droppedSlowClients, 1);
    assert.equal(hub.size, 1);
    reader.close();
    stalled.destroy();
  });
});
