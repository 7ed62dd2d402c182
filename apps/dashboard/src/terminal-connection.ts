import type { Role, TerminalMode } from '@ccp/api';
import { api } from './api';

export type ConnectionState =
  | { kind: 'connecting'; attempt: number }
  | { kind: 'open'; session: string }
  | { kind: 'reconnecting'; attempt: number; inSeconds: number; why: string }
  | { kind: 'ended'; why: string };

export interface TerminalSink {
  write(data: Uint8Array): void;
  size(): { cols: number; rows: number };
  state(state: ConnectionState): void;
}

/** Close reasons after which connecting again cannot help (the gateway's web-terminal.ts names them). */
const FINAL: Record<string, string> = {
  session_ended:
    'The tmux session ended, or this terminal was detached from it (another client took it over).',
  host_stopped: 'The host stopped.',
  too_many_terminals: 'You have as many browser terminals open as one user may; close one and reload.',
  user_disabled: 'The account was disabled.',
  user_expired: 'The account has expired.',
  user_deleted: 'The account was deleted.',
  user_revoked: 'Access to this host ended.',
  user_credentials_changed: 'The password changed: sign in again.',
};
const MAX_ATTEMPTS = 8;

/**
 * One browser terminal's link to the gateway: each connection asks for a one-time ticket with the API token (in a
 * header), then opens the WebSocket the ticket names on this page's own origin. The tmux session lives in the
 * workspace, so when the WebSocket drops, the next one attaches to the same session again, with backoff.
 */
export class TerminalConnection {
  private socket: WebSocket | null = null;
  private closed = false;
  private attempt = 0;
  private retry: ReturnType<typeof setTimeout> | null = null;
  private readonly encoder = new TextEncoder();
  /** After the first open, reconnects attach to the session that was opened, whatever the first mode was. */
  private session: string | undefined;
  private mode: TerminalMode;

  constructor(
    private readonly scope: Role,
    private readonly hostId: string,
    private readonly sink: TerminalSink,
    start: { session?: string; mode: TerminalMode },
  ) {
    this.session = start.session;
    this.mode = start.mode;
    void this.connect();
  }

  /** What was typed or pasted. */
  send(text: string): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(this.encoder.encode(text));
  }

  resize(cols: number, rows: number): void {
    this.control({ type: 'resize', cols, rows });
  }

  /** Moves through tmux's history of the session (negative: back). */
  scroll(lines: number): void {
    this.control({ type: 'scroll', lines });
  }

  close(): void {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.socket?.close(1000);
  }

  private control(message: object): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  private async connect(): Promise<void> {
    this.attempt++;
    this.sink.state({ kind: 'connecting', attempt: this.attempt });
    let url: string;
    try {
      const { cols, rows } = this.sink.size();
      const ticket = await api[this.scope].hosts.terminal.ticket(this.hostId, {
        ...(this.session ? { session: this.session } : {}),
        mode: this.mode,
        cols,
        rows,
      });
      this.session = ticket.session;
      // The gateway serving this page serves the WebSocket too, whatever public address the ticket names.
      const named = new URL(ticket.url);
      url = `${window.location.protocol === 'https:' ? 'wss' : 'ws'}://${window.location.host}${named.pathname}${named.search}`;
    } catch (error) {
      const status = (error as { status?: number }).status;
      const message = error instanceof Error ? error.message : String(error);
      // A refusal of the ticket (host stopped, limit, no access) is told as it is; a network failure is retried.
      if (status !== undefined && status < 500) this.end(message);
      else this.later(message);
      return;
    }
    if (this.closed) return;
    const socket = new WebSocket(url);
    socket.binaryType = 'arraybuffer';
    this.socket = socket;
    socket.onopen = () => {
      this.attempt = 0;
      // Ticket done: later connections join this session as it is now.
      this.mode = 'attach';
      this.sink.state({ kind: 'open', session: this.session ?? '' });
    };
    socket.onmessage = (event) => {
      if (event.data instanceof ArrayBuffer) this.sink.write(new Uint8Array(event.data));
    };
    socket.onclose = (event) => {
      if (this.socket !== socket || this.closed) return;
      this.socket = null;
      const final = FINAL[event.reason];
      if (final) this.end(final);
      else this.later(event.reason || 'the connection dropped');
    };
  }

  private later(why: string): void {
    if (this.closed) return;
    if (this.attempt >= MAX_ATTEMPTS) {
      this.end(`Could not reconnect (${why}); reload the page to try again.`);
      return;
    }
    const inSeconds = Math.min(2 ** this.attempt / 2, 15);
    this.sink.state({ kind: 'reconnecting', attempt: this.attempt, inSeconds, why });
    this.retry = setTimeout(() => void this.connect(), inSeconds * 1000);
  }

  private end(why: string): void {
    this.closed = true;
    this.sink.state({ kind: 'ended', why });
  }
}
