import type { Readable } from 'node:stream';
import type { ConnectionOptions, TlsOptions } from 'node:tls';
import type { SecretBox } from '../domain/access/secret-box.js';
import type { ExecResult } from '../runtime/workspace-runtime.js';

/**
 * The internal channel between gateways sharing a database: TLS 1.2 with a pre-shared key per node (PSK needs
 * TLS 1.2 in Node) and an ephemeral ECDHE exchange, so a key learnt later opens no recorded session.
 */
export const CHANNEL_TLS: Pick<TlsOptions & ConnectionOptions, 'ciphers' | 'minVersion' | 'maxVersion'> = {
  ciphers: 'ECDHE-PSK-CHACHA20-POLY1305',
  minVersion: 'TLSv1.2',
  maxVersion: 'TLSv1.2',
};

/** The key node `name` proves itself with: derived from DATA_DIR/secrets.key, so only gateways holding that
 * file can compute any node's key, and nothing is stored or configured per node. */
export function nodeChannelKey(box: SecretBox, name: string): Buffer {
  return box.derive(`node channel ${name}`);
}

/** A byte stream to one service of a running host, relayed by the host's node. */
export type StreamService = 'ssh' | 'desktop';

/** What a client asks, as one JSON line right after the handshake. */
export type ChannelRequest =
  | { host: string; service: StreamService }
  /** One command in the workspace (only those the serving node allows: the desktop's controls). */
  | { host: string; service: 'exec'; command: string[]; timeout_ms: number };

/** The answer, one JSON line; after `ok` for a stream, the connection carries the service's bytes. */
export type ChannelReply =
  | { ok: true; result?: ExecResult | null }
  | { ok: false; code: ChannelRefusal; message: string; runtime_code?: string };

/**
 * Why a node refused: `no_path` and `host_not_running` mean the host has no service to reach (as a local host
 * without endpoints); `runtime` is the engine's failure of an exec, its own code in `runtime_code`.
 */
export type ChannelRefusal =
  | 'unknown_node'
  | 'bad_request'
  | 'unknown_host'
  | 'not_here'
  | 'host_not_running'
  | 'no_path'
  | 'unreachable'
  | 'not_allowed'
  | 'runtime';

/** A request line is a host id and a short command: anything longer is not a node speaking. */
export const MAX_REQUEST_BYTES = 4096;
/** The time a peer has for its handshake, and then for its request line. */
export const REQUEST_TIMEOUT_MS = 5_000;
/** An exec reply carries both outputs, each capped at EXEC_OUTPUT_CAP (1 MiB), escaped as JSON. */
export const MAX_REPLY_BYTES = 16 * 1024 * 1024;
/** The longest command the serving node waits for. */
export const MAX_EXEC_MS = 120_000;

export class LineError extends Error {}

/**
 * Reads one `\n`-terminated line of at most `max` bytes within `timeoutMs`, and puts back whatever followed it,
 * so the stream can be handed on (piped, or given to ssh2 or ws) with no byte lost.
 */
export function readLine(stream: Readable, max: number, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = Buffer.alloc(0);
    const finish = (error: Error | null, line = '') => {
      clearTimeout(timer);
      stream.off('readable', onReadable);
      stream.off('end', onEnd);
      stream.off('close', onEnd);
      stream.off('error', onError);
      if (error) reject(error);
      else resolve(line);
    };
    const onReadable = () => {
      for (
        let chunk = stream.read() as Buffer | null;
        chunk !== null;
        chunk = stream.read() as Buffer | null
      ) {
        buffered = Buffer.concat([buffered, chunk]);
        const end = buffered.indexOf(0x0a);
        if (end >= 0 && end <= max) {
          const rest = buffered.subarray(end + 1);
          // Removing the last 'readable' listener leaves the stream to whoever reads it next.
          finish(null, buffered.subarray(0, end).toString('utf8'));
          if (rest.length > 0) stream.unshift(rest);
          return;
        }
        if (buffered.length > max) return finish(new LineError(`a line longer than ${max} bytes`));
      }
    };
    const onEnd = () => finish(new LineError('the connection ended before a full line'));
    const onError = (error: Error) => finish(error);
    const timer = setTimeout(
      () => finish(new LineError(`no full line within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    stream.on('readable', onReadable);
    stream.once('end', onEnd);
    stream.once('close', onEnd);
    stream.once('error', onError);
  });
}

/** The request in `line`, or null when it is not one this protocol knows. */
export function parseRequest(line: string): ChannelRequest | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { host, service, command, timeout_ms } = value as Record<string, unknown>;
  if (typeof host !== 'string' || host.length === 0 || host.length > 64) return null;
  if (service === 'ssh' || service === 'desktop') return { host, service };
  if (
    service === 'exec' &&
    Array.isArray(command) &&
    command.length > 0 &&
    command.every((part) => typeof part === 'string') &&
    typeof timeout_ms === 'number' &&
    Number.isInteger(timeout_ms) &&
    timeout_ms > 0
  )
    return { host, service, command: command as string[], timeout_ms: Math.min(timeout_ms, MAX_EXEC_MS) };
  return null;
}

/** The reply in `line`, or null when it is not one. */
export function parseReply(line: string): ChannelReply | null {
  try {
    const value = JSON.parse(line) as ChannelReply;
    if (value?.ok === true) return value;
    if (value?.ok === false && typeof value.code === 'string' && typeof value.message === 'string')
      return value;
  } catch {
    // not JSON: not a node's reply
  }
  return null;
}
