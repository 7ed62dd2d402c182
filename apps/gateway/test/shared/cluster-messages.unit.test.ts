import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Logger } from 'pino';
import type { TSchema } from 'typebox';
import {
  ClusterBus,
  type ClusterTransport,
  clusterMessageSchemas,
} from '../../src/shared/cluster-messages.js';

/** One database's channel: every text sent reaches every gateway listening, the sender too (as NOTIFY does). */
class Wire {
  readonly sent: string[] = [];
  private readonly listeners: { onText: (text: string) => void; onMissed: () => void }[] = [];

  transport(): ClusterTransport {
    return {
      live: true,
      send: async (text) => {
        this.sent.push(text);
        this.deliver(text);
      },
      listen: (onText, onMissed) => void this.listeners.push({ onText, onMissed }),
    };
  }

  deliver(text: string): void {
    for (const listener of this.listeners) listener.onText(text);
  }

  drop(): void {
    for (const listener of this.listeners) listener.onMissed();
  }
}

/** What a gateway logged: level, the reason a message was dropped (or the error), and the line. */
function gateway(wire: Wire) {
  const logged: { level: string; fields: Record<string, unknown>; line: string }[] = [];
  const log = {
    warn: (fields: Record<string, unknown>, line: string) => logged.push({ level: 'warn', fields, line }),
    error: (fields: Record<string, unknown>, line: string) => logged.push({ level: 'error', fields, line }),
  } as unknown as Pick<Logger, 'warn' | 'error'>;
  return { bus: new ClusterBus(wire.transport(), log), logged };
}

describe('cluster messages between gateways', () => {
  it('carries a typed payload as JSON to the other gateways, not back to the sender', async () => {
    const wire = new Wire();
    const a = gateway(wire);
    const b = gateway(wire);
    const heard: string[] = [];
    a.bus.subscribe('users.changed', () => heard.push('a'));
    b.bus.subscribe('users.changed', () => heard.push('b'));

    await a.bus.publish('users.changed', {});

    assert.deepEqual(heard, ['b']);
    const [text] = wire.sent;
    const parsed = JSON.parse(text!) as { name: string; from: string; payload: unknown };
    assert.equal(parsed.name, 'users.changed');
    assert.deepEqual(parsed.payload, {});
    assert.match(parsed.from, /^[0-9a-f-]{36}$/);
    assert.deepEqual([...a.logged, ...b.logged], []);
  });

  it('logs and drops a malformed message: no handler ever sees it', () => {
    const wire = new Wire();
    const b = gateway(wire);
    const heard: unknown[] = [];
    b.bus.subscribe('users.changed', (payload) => heard.push(payload));
    b.bus.subscribe('live.appended', (payload) => heard.push(payload));
    b.bus.subscribe('access.revoked', (payload) => heard.push(payload));
    const from = '00000000-0000-4000-8000-000000000000';
    const malformed: [string, RegExp][] = [
      ['users', /not JSON/],
      ['users.changed {}', /not JSON/],
      ['{"name":"users.changed"', /not JSON/],
      ['null', /not a message envelope/],
      ['["users.changed", {}]', /not a message envelope/],
      ['{"name":"users.changed","payload":{}}', /not a message envelope/],
      [`{"name":"users.changed","from":"${from}"}`, /not a message envelope/],
      [`{"name":42,"from":"${from}","payload":{}}`, /not a message envelope/],
      [`{"name":"users.dropped","from":"${from}","payload":{}}`, /unknown message name/],
      [`{"name":"toString","from":"${from}","payload":{}}`, /unknown message name/],
      [`{"name":"users.changed","from":"${from}","payload":"everything"}`, /does not match users.changed/],
      [`{"name":"users.changed","from":"${from}","payload":null}`, /does not match users.changed/],
      ['live 42', /not JSON/],
      [`{"name":"live.appended","from":"${from}","payload":{"seq":"42"}}`, /does not match live.appended/],
      [`{"name":"live.appended","from":"${from}","payload":{"seq":4.2}}`, /does not match live.appended/],
      [`{"name":"live.appended","from":"${from}","payload":{}}`, /does not match live.appended/],
      [`revocations ${from} alice disabled`, /not JSON/],
      [
        `{"name":"access.revoked","from":"${from}","payload":{"userId":"alice","reason":"bored"}}`,
        /does not match access.revoked/,
      ],
      [
        `{"name":"access.revoked","from":"${from}","payload":{"reason":"disabled"}}`,
        /does not match access.revoked/,
      ],
      ['tasks.queued b', /not JSON/],
      ['egress.changed b 5f0c', /not JSON/],
      [
        `{"name":"egress_ip.upstream_changed","from":"${from}","payload":{"egressIpId":null}}`,
        /does not match egress_ip.upstream_changed/,
      ],
      [
        `{"name":"host.upstream_switch_requested","from":"${from}","payload":"5f0c"}`,
        /does not match host.upstream_switch_requested/,
      ],
      [`{"name":"task.queued","from":"${from}","payload":{"node":""}}`, /does not match task.queued/],
      [
        `{"name":"task.cancel_requested","from":"${from}","payload":{"taskId":7}}`,
        /does not match task.cancel_requested/,
      ],
    ];
    for (const [text] of malformed) assert.doesNotThrow(() => wire.deliver(text), text);

    assert.deepEqual(heard, []);
    assert.equal(b.logged.length, malformed.length);
    for (const [index, [text, why]] of malformed.entries()) {
      const entry = b.logged[index]!;
      assert.equal(entry.level, 'warn', text);
      assert.match(entry.line, /malformed message from another gateway/);
      assert.match(String(entry.fields.why), why, text);
      assert.equal(entry.fields.message, text);
    }

    wire.deliver(`{"name":"users.changed","from":"${from}","payload":{}}`);
    wire.deliver(`{"name":"live.appended","from":"${from}","payload":{"seq":42}}`);
    wire.deliver(
      `{"name":"access.revoked","from":"${from}","payload":{"userId":"alice","reason":"disabled"}}`,
    );
    assert.deepEqual(
      heard,
      [{}, { seq: 42 }, { userId: 'alice', reason: 'disabled' }],
      'well-formed messages still get through',
    );
  });

  it('logs no more than the start of a long malformed message', () => {
    const wire = new Wire();
    const b = gateway(wire);
    wire.deliver(`x${'y'.repeat(5000)}`);
    assert.equal(String(b.logged[0]?.fields.message).length, 200);
  });

  it('keeps running the other handlers when one fails, and never throws into the transport', async () => {
    const wire = new Wire();
    const a = gateway(wire);
    const b = gateway(wire);
    const heard: string[] = [];
    b.bus.subscribe('users.changed', () => {
      throw new Error('broken handler');
    });
    b.bus.subscribe('users.changed', () => heard.push('second'));

    await a.bus.publish('users.changed', {});

    assert.deepEqual(heard, ['second']);
    assert.equal(b.logged.length, 1);
    assert.equal(b.logged[0]!.level, 'error');
    assert.match(String(b.logged[0]!.fields.err), /broken handler/);
  });

  it('carries no field that looks like a secret: every gateway, and anyone who can LISTEN, reads them', () => {
    const fields = (schema: TSchema): string[] =>
      Object.entries((schema as { properties?: Record<string, TSchema> }).properties ?? {}).flatMap(
        ([name, field]) => [name, ...fields(field)],
      );
    for (const [name, schema] of Object.entries(clusterMessageSchemas))
      for (const field of fields(schema))
        assert.doesNotMatch(field, /pass|secret|token|private|credential|config|key/i, `${name}.${field}`);
  });

  it('tells its subscribers when messages may have been missed', () => {
    const wire = new Wire();
    const b = gateway(wire);
    let missed = 0;
    b.bus.onMissed(() => missed++);
    wire.drop();
    assert.equal(missed, 1);
  });
});
