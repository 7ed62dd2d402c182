import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import Type, { type Static, type TSchema } from 'typebox';
import Value from 'typebox/value';

/** Why a user's live access ended. */
const RevocationReason = Type.Union([
  Type.Literal('disabled'),
  Type.Literal('expired'),
  Type.Literal('deleted'),
  Type.Literal('credentials_changed'),
]);
export type RevocationReason = Static<typeof RevocationReason>;

/**
 * What one gateway tells the others sharing its database, by name, with the schema its payload is checked
 * against on receipt. Payloads name things (ids, node names, seqs) and never carry a secret: every gateway on the
 * database, and anyone who can LISTEN on it, reads them.
 */
export const clusterMessageSchemas = {
  /** A write to the users table: cached users and token checks are forgotten. */
  'users.changed': Type.Object({}),
  /** Live (SSE) messages were appended to the live_messages table, up to `seq`: read them. */
  'live.appended': Type.Object({ seq: Type.Integer({ minimum: 1 }) }),
  /** A user's access was revoked: the sessions and streams they hold end on every gateway. */
  'access.revoked': Type.Object({ userId: Type.String({ minLength: 1 }), reason: RevocationReason }),
  /** A task was queued for `node`, whose gateway takes it from the table. */
  'task.queued': Type.Object({ node: Type.String({ minLength: 1 }) }),
  /** Cancelling a task was asked for in its row: the gateway running it aborts it. */
  'task.cancel_requested': Type.Object({ taskId: Type.String({ minLength: 1 }) }),
  /** A host was created: its node makes its workspace ahead of the first start. */
  'host.created': Type.Object({ hostId: Type.String({ minLength: 1 }) }),
  /** A running host's egress gateway must follow its active binding: the host's node applies it. */
  'host.upstream_switch_requested': Type.Object({ hostId: Type.String({ minLength: 1 }) }),
  /** A running host's egress policy changed: the host's node applies it to its egress gateway. */
  'host.egress_policy_changed': Type.Object({ hostId: Type.String({ minLength: 1 }) }),
  /** An egress IP's upstream was edited: each node switches its own running hosts that use it. */
  'egress_ip.upstream_changed': Type.Object({ egressIpId: Type.String({ minLength: 1 }) }),
  /**
   * A line for the host's users (a coming policy stop, an egress budget, a pause): each gateway writes `text` to
   * its own SSH terminals of the host (the sender told its own).
   */
  'host.terminal_notice': Type.Object({
    hostId: Type.String({ minLength: 1 }),
    text: Type.String({ minLength: 1, maxLength: 2000 }),
  }),
} satisfies Record<string, TSchema>;

export type ClusterMessageName = keyof typeof clusterMessageSchemas;
export type ClusterMessages = { [K in ClusterMessageName]: Static<(typeof clusterMessageSchemas)[K]> };

/**
 * How messages travel between the gateways on one database (store/change-feed.ts): text to every gateway,
 * possibly the sender too, and a notice whenever some may have been missed.
 */
export interface ClusterTransport {
  /** Whether messages are heard now (always with SQLite: no other gateway writes to its file). */
  readonly live: boolean;
  send(text: string): Promise<void>;
  /** `onText` for each message heard; `onMissed` when the transport dropped or came back. */
  listen(onText: (text: string) => void, onMissed: () => void): void;
}

/** A message on the wire: its name, the bus that sent it, and its payload. */
const Envelope = Type.Object({ name: Type.String(), from: Type.String(), payload: Type.Unknown() });
type Envelope = Static<typeof Envelope>;

const MAX_LOGGED = 200;

/**
 * The one channel between gateways: typed `publish` and `subscribe` over the transport, as JSON. A message that
 * does not parse, has no known name or whose payload does not match its schema is logged and dropped: no
 * handler ever sees it. Handlers hear the other gateways only, never this one's own messages.
 */
export class ClusterBus {
  private readonly origin = randomUUID();
  private readonly handlers = new Map<ClusterMessageName, ((payload: never) => void)[]>();
  private readonly missedHandlers: (() => void)[] = [];

  constructor(
    private readonly transport: ClusterTransport,
    private readonly log: Pick<Logger, 'warn' | 'error'>,
  ) {
    transport.listen(
      (text) => this.receive(text),
      () => this.missed(),
    );
  }

  get live(): boolean {
    return this.transport.live;
  }

  async publish<K extends ClusterMessageName>(name: K, payload: ClusterMessages[K]): Promise<void> {
    const envelope: Envelope = { name, from: this.origin, payload };
    await this.transport.send(JSON.stringify(envelope));
  }

  /** `handler` runs for each `name` another gateway publishes. */
  subscribe<K extends ClusterMessageName>(name: K, handler: (payload: ClusterMessages[K]) => void): void {
    const list = this.handlers.get(name) ?? [];
    list.push(handler);
    this.handlers.set(name, list);
  }

  /** `handler` runs whenever messages may have been missed (the transport dropped or came back). */
  onMissed(handler: () => void): void {
    this.missedHandlers.push(handler);
  }

  private receive(text: string): void {
    const envelope = this.parse(text);
    if (!envelope || envelope.from === this.origin) return;
    for (const handler of this.handlers.get(envelope.name as ClusterMessageName) ?? [])
      this.run(() => handler(envelope.payload as never), envelope.name);
  }

  private parse(text: string): Envelope | null {
    let envelope: unknown;
    try {
      envelope = JSON.parse(text);
    } catch {
      return this.refuse(text, 'not JSON');
    }
    if (!Value.Check(Envelope, envelope)) return this.refuse(text, 'not a message envelope');
    if (!Object.hasOwn(clusterMessageSchemas, envelope.name))
      return this.refuse(text, 'unknown message name');
    if (!Value.Check(clusterMessageSchemas[envelope.name as ClusterMessageName], envelope.payload))
      return this.refuse(text, `payload does not match ${envelope.name}`);
    return envelope;
  }

  private refuse(text: string, why: string): null {
    this.log.warn(
      { message: text.slice(0, MAX_LOGGED), why },
      'dropped a malformed message from another gateway',
    );
    return null;
  }

  private missed(): void {
    for (const handler of this.missedHandlers) this.run(handler, 'missed');
  }

  /** A failing handler is logged; the others still run, and the transport never sees the error. */
  private run(handler: () => void, what: string): void {
    try {
      handler();
    } catch (error) {
      this.log.error({ err: error, message: what }, 'a handler of a cluster message failed');
    }
  }
}
