import type { EntryReady, EntryStarting, ErrorBody } from '@ccp/api';
import { AuthError, NetworkError, StartTimeoutError } from './errors.js';
import { postJson } from './http.js';

export interface EntryAuthOptions {
  gateway: string;
  shortId: string;
  password: string;
  /** How long a starting host may take before exit 3. */
  waitSeconds: number;
  onStarting?: (answer: EntryStarting) => void;
  pollMs?: number;
}

/** A wrong password: the caller may ask again. */
export class WrongPasswordError extends AuthError {}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Entry auth (decisions.md §6): the owner's login password gives the SSH parameters of a running host; a
 * stopped host is started, and the call is repeated with the task's ID until it is ready or the start failed.
 */
export async function entryAuth(options: EntryAuthOptions): Promise<EntryReady> {
  const url = `${options.gateway}/v1/entry/${encodeURIComponent(options.shortId)}/auth`;
  const deadline = Date.now() + options.waitSeconds * 1000;
  let taskId: string | null = null;
  for (;;) {
    const answer = await postJson(url, {
      password: options.password,
      ...(taskId ? { task_id: taskId } : {}),
    });
    const body = answer.body as (Partial<ErrorBody> & { status?: string; task_id?: string }) | null;
    if (answer.status === 200 && body?.status === 'ready') return body as EntryReady;
    if (answer.status === 202 && body?.status === 'starting') {
      taskId = body.task_id ?? taskId;
      options.onStarting?.(body as EntryStarting);
    } else if (!(answer.status === 409 && body?.code === 'host_busy')) {
      throw failureOf(answer.status, body, options.shortId);
    }
    if (Date.now() >= deadline)
      throw new StartTimeoutError(
        `host ${options.shortId} did not become ready within ${options.waitSeconds} s; run ccp again to keep waiting`,
      );
    await sleep(Math.min(options.pollMs ?? 2000, Math.max(0, deadline - Date.now())));
  }
}

function failureOf(status: number, body: Partial<ErrorBody> | null, shortId: string): Error {
  const said = body?.error ? `: ${body.error}` : '';
  switch (status) {
    case 401:
      return new WrongPasswordError(`wrong password for host ${shortId}`);
    case 403:
      return new AuthError(`access refused${said}`);
    case 404:
      return new AuthError(`no host with short ID ${shortId} on this gateway`);
    case 429:
      return new AuthError(`too many failed attempts; try again in ${body?.retry_after ?? 'a few'} seconds`);
    case 409:
      if (body?.code === 'task_failed')
        return new StartTimeoutError(
          `host ${shortId} failed to start${body.task_error?.message ? `: ${body.task_error.message}` : said}`,
        );
      if (body?.code === 'no_egress_bound')
        return new StartTimeoutError(
          `host ${shortId} cannot start: it has no egress IP bound (ask the administrator)`,
        );
      return new NetworkError(`the gateway refused the request (409 ${body?.code ?? ''})${said}`);
    default:
      return new NetworkError(`the gateway answered HTTP ${status}${said}`);
  }
}
