import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { describe, it } from 'node:test';
import type { Host, SseMessage, SseTopic, Task } from '@ccp/api';
import pino from 'pino';
import { AccessRevocation } from '../../src/domain/access/access-revocation.js';
import { EventBus, systemActor } from '../../src/events/event-bus.js';
import { EventLogWriter } from '../../src/events/event-log.js';
import { SseHub } from '../../src/events/sse-hub.js';
import { SseProjection } from '../../src/events/sse-projection.js';
import type { EventsRepository } from '../../src/store/events-repository.js';

/** Just enough of a ServerResponse for the hub: it keeps the messages written to it. */
class Stream extends EventEmitter {
  readonly writableLength = 0;
  readonly socket = null;
  private readonly frames: string[] = [];
  writeHead(): void {}
  end(): void {}
  write(frame: string): boolean {
    this.frames.push(frame);
    return true;
  }
  messages(): SseMessage[] {
    return this.frames
      .filter((frame) => frame.startsWith('event: message'))
      .map((frame) => JSON.parse(frame.split('\ndata: ')[1]!) as SseMessage);
  }
}

const ALL: ReadonlySet<SseTopic> = new Set(['hosts', 'tasks', 'image-status', 'egress-ips', 'nodes']);

function setup() {
  const rows: { type: string; data: string }[] = [];
  const repository = { insert: async (row: { type: string; data: string }) => void rows.push(row) };
  const hub = new SseHub({ heartbeatMs: 60_000 });
  const bus = new EventBus(
    new EventLogWriter(repository as unknown as EventsRepository, pino({ level: 'silent' })),
    new SseProjection(hub),
  );
  const attach = (role: 'admin' | 'user', userId: string) => {
    const stream = new Stream();
    hub.attach(
      stream as unknown as ServerResponse,
      { role, userId, topics: ALL, tokenVersion: 1, expiresAt: null },
      null,
    );
    return stream;
  };
  return { rows, hub, bus, attach };
}

// Only the fields the projection reads; the rest of a view does not matter here.
const host = (id: string, userId: string) => ({ id, user_id: userId, short_id: id }) as unknown as Host;
const task = (id: string, userId: string) => ({ id, user_id: userId }) as unknown as Task;

describe('event bus', () => {
  it('projects events to SSE: hosts and tasks reach their owner and admins, egress IPs and images admins only', async () => {
    const { rows, hub, bus, attach } = setup();
    const admin = attach('admin', 'root');
    const alice = attach('user', 'alice');
    const bob = attach('user', 'bob');
    await bus.emit({
      type: 'host.created',
      message: 'host created',
      actor: systemActor,
      userId: 'alice',
      hostId: 'h1',
      data: { short_id: 'h1', egress_ip_id: null, node: 'local' },
      host: host('h1', 'alice'),
    });
    bus.notify({ type: 'task.queued', task: task('t1', 'bob') });
    await bus.emit({
      type: 'host.deleted',
      message: 'host deleted',
      actor: systemActor,
      userId: 'bob',
      hostId: 'h2',
      data: { short_id: 'h2' },
    });
    await bus.emit({
      type: 'egress_ip.deleted',
      message: 'egress IP deleted',
      actor: systemActor,
      data: { egress_ip_id: 'e1', label: 'one' },
    });
    bus.notify({ type: 'image.checked', images: [] });
    hub.closeAll();

    const seen = (stream: Stream) => stream.messages().map((m) => `${m.topic} ${m.action} ${m.id ?? ''}`);
    assert.deepEqual(seen(admin), [
      'hosts create h1',
      'tasks create t1',
      'hosts delete h2',
      'egress-ips delete e1',
      'image-status update ',
    ]);
    assert.deepEqual(seen(alice), ['hosts create h1']);
    assert.deepEqual(seen(bob), ['tasks create t1', 'hosts delete h2']);
    // Live notices never reach the event log.
    assert.deepEqual(
      rows.map((row) => row.type),
      ['host.created', 'host.deleted', 'egress_ip.deleted'],
    );
  });

  it('keeps a refused egress update off the live streams but in the log', async () => {
    const { rows, hub, bus, attach } = setup();
    const admin = attach('admin', 'root');
    const result = { ok: false } as never;
    await bus.emit({
      type: 'egress_ip.update.refused',
      level: 'warn',
      message: 'refused',
      actor: systemActor,
      data: { egress_ip_id: 'e1', label: 'one', result, host_ids: [] },
    });
    hub.closeAll();
    assert.deepEqual(admin.messages(), []);
    assert.deepEqual(
      rows.map((row) => row.type),
      ['egress_ip.update.refused'],
    );
  });

  it('delivers events to internal subscribers, in the order registered, after the log row', async () => {
    const { rows, bus } = setup();
    const calls: string[] = [];
    bus.on('user.access_ended', ({ userId, reason }) => void calls.push(`ended ${userId} ${reason}`));
    bus.on('user.access_revoked', async ({ userId }) => void calls.push(`revoked first ${userId}`));
    bus.on('user.access_revoked', ({ userId }) => void calls.push(`revoked then ${userId}`));
    bus.on('host.failover', () => void calls.push(`failover after ${rows.length} row`));

    await new AccessRevocation(bus).revoke('alice', 'disabled');
    await bus.emit({
      type: 'host.failover',
      level: 'warn',
      message: 'failover',
      actor: systemActor,
      data: { from_egress_ip_id: 'e1', to_egress_ip_id: 'e2' },
    });
    assert.deepEqual(calls, [
      'ended alice disabled',
      'revoked first alice',
      'revoked then alice',
      'failover after 1 row',
    ]);
  });

  it('does not compile an unknown event name or a payload that does not fit the name', () => {
    const { bus } = setup();
    // Never run: these lines are here for the type checker (npm run typecheck).
    const wrong = () => [
      // @ts-expect-error an event name the map does not know
      bus.emit({ type: 'host.exploded', message: 'boom', actor: systemActor }),
      // @ts-expect-error host.deleted has no `host` view, and `data` must carry its short_id
      bus.emit({ type: 'host.deleted', message: 'gone', actor: systemActor, data: {}, host: host('h', 'u') }),
      // @ts-expect-error a live notice is not emitted into the log
      bus.emit({ type: 'task.queued', task: task('t', 'u') }),
      // @ts-expect-error internal reactions subscribe to names of the map only
      bus.on('user.vanished', () => {}),
    ];
    assert.equal(typeof wrong, 'function');
  });
});
