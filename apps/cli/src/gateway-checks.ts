import type { EntryCheck, ErrorBody } from '@ccp/api';
import { WrongPasswordError } from './entry-auth.js';
import { AuthError, ConfigError, NetworkError } from './errors.js';
import { getJson, postJson } from './http.js';

type Answer = Partial<ErrorBody> & Record<string, unknown>;

/**
 * That `gateway` is the gateway's API (where ccp sends entry auth), not its entry-link port or another server.
 * Resolves with what its health check says; throws a NetworkError (2) when nothing answers, a ConfigError (4)
 * when something else does, naming the right address when the gateway said it.
 */
export async function checkGateway(gateway: string): Promise<{ status: string }> {
  const answer = await getJson(`${gateway}/healthz`, 15_000);
  const body = answer.body as Answer | null;
  if (body?.code === 'wrong_port') {
    const api = typeof body.api_url === 'string' ? body.api_url : null;
    throw new ConfigError(
      `${gateway} is the gateway's entry-link port (for \`curl … /entry/<short id> | sh\`), not its API` +
        (api
          ? `; the API is at ${api}: ccp init --gateway ${api}`
          : '; give the API address (port 8080 by default)'),
    );
  }
  if ((answer.status === 200 || answer.status === 503) && typeof body?.status === 'string' && body.checks)
    return { status: body.status };
  throw new ConfigError(
    `${gateway} does not answer as a cloud-cli-proxy gateway (GET /healthz: HTTP ${answer.status}); ` +
      'check the address and the port: the API port (8080 by default), the one the dashboard is on',
  );
}

/**
 * That the short ID names a host on this gateway and `password` is its owner's, starting nothing. Throws an
 * AuthError (1) for a wrong password, an unknown short ID, a refused account or too many attempts.
 */
export async function checkHost(gateway: string, shortId: string, password: string): Promise<EntryCheck> {
  const answer = await postJson(`${gateway}/v1/entry/${encodeURIComponent(shortId)}/check`, { password });
  const body = answer.body as Answer | null;
  switch (answer.status) {
    case 200:
      return answer.body as EntryCheck;
    case 401:
      throw new WrongPasswordError(`wrong password for host ${shortId}`);
    case 403:
      throw new AuthError(`access refused${body?.error ? `: ${body.error}` : ''}`);
    case 404:
      throw new AuthError(
        `no host with short ID ${shortId} on ${gateway}; the short ID is on the host's page in the dashboard`,
      );
    case 429:
      throw new AuthError(`too many failed attempts; try again in ${body?.retry_after ?? 'a few'} seconds`);
    default:
      throw new NetworkError(
        `the gateway answered HTTP ${answer.status}${body?.error ? `: ${body.error}` : ''}`,
      );
  }
}

/** What the host's state means for the next `ccp`. */
export function hostStateAdvice(status: string): { ok: boolean; text: string } {
  switch (status) {
    case 'running':
      return { ok: true, text: 'running' };
    case 'created':
    case 'stopped':
      return { ok: true, text: `${status}; ccp starts it when you connect` };
    case 'starting':
    case 'stopping':
    case 'rebuilding':
      return { ok: true, text: `${status}; ccp waits for it when you connect` };
    case 'failed':
      return {
        ok: false,
        text: 'failed; ccp tries to start it again, and the dashboard shows why it failed (ask the administrator if it fails again)',
      };
    default:
      return {
        ok: false,
        text: `${status}; its gateway node is not reachable: ask the administrator`,
      };
  }
}
