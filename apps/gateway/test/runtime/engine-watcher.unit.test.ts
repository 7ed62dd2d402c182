import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { EngineWatcher } from '../../src/runtime/engine-watcher.js';

/**
 * A stand-in for the Docker Engine API on a unix socket: the events stream (held open, or cut by the test) and an
 * empty container list. Counts the subscriptions to the events stream.
 */
class FakeEngine {
  subscriptions = 0;
  private readonly open = new Set<http.ServerResponse>();
  readonly server = http.createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://engine');
    if (url.pathname.endsWith('/events')) {
      this.subscriptions++;
      this.open.add(response);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('\n');
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('[]');
  });

  /** Cuts every events stream mid-response, as an engine that stops does. */
  cutEvents(): void {
    for (const response of this.open) response.socket?.destroy();
    this.open.clear();
  }

  close(): void {
    this.cutEvents();
    this.server.closeAllConnections();
    this.server.close();
  }
}

describe('EngineWatcher', () => {
  let dir: string;
  let socketPath: string;
  let engine: FakeEngine;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'ccp-engine-'));
    socketPath = path.join(dir, 'docker.sock');
    engine = new FakeEngine();
    await new Promise<void>((resolve) => engine.server.listen(socketPath, resolve));
  });
  after(async () => {
    engine.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('subscribes again when the events stream is cut while it catches up on the hosts', async () => {
    let catchUps = 0;
    const watcher = new EngineWatcher({
      docker: new Docker({ socketPath }),
      owner: 'test-owner',
      relink: async () => {},
      hostIds: async () => {
        catchUps++;
        // The engine goes away right after the subscription, before the watcher reads its stream.
        if (catchUps === 1) {
          engine.cutEvents();
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        return [];
      },
    });
    const errors: unknown[] = [];
    const stop = watcher.watch((error) => errors.push(error));
    try {
      const deadline = Date.now() + 5000;
      while (engine.subscriptions < 2 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(engine.subscriptions, 2, 'the watcher subscribed again after its stream was cut');
    } finally {
      stop();
    }
  });
});
