import { EnvHttpProxyAgent, fetch } from 'undici';
import { NetworkError } from './errors.js';

// Reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY (either case), as curl does.
const dispatcher = new EnvHttpProxyAgent();

export interface JsonAnswer {
  status: number;
  body: unknown;
}

/** One JSON request to the gateway (with a bearer token when given); a transport failure or time-out is a
 * NetworkError. */
export function postJson(
  url: string,
  body: unknown,
  timeoutMs = 30_000,
  token?: string,
): Promise<JsonAnswer> {
  return requestJson(url, body, timeoutMs, token);
}

/** A GET of a JSON document from the gateway; `body` is null when the answer is not JSON. */
export function getJson(url: string, timeoutMs = 30_000, token?: string): Promise<JsonAnswer> {
  return requestJson(url, undefined, timeoutMs, token);
}

async function requestJson(
  url: string,
  body: unknown,
  timeoutMs: number,
  token?: string,
): Promise<JsonAnswer> {
  let response: Awaited<ReturnType<typeof fetch>>;
  try {
    response = await fetch(url, {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        'user-agent': 'ccp-cli',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      dispatcher,
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    const cause = (error as { cause?: Error }).cause;
    throw new NetworkError(
      `cannot reach the gateway at ${new URL(url).origin}: ${(cause ?? (error as Error)).message}`,
    );
  }
  const text = await response.text().catch(() => '');
  let parsed: unknown = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: response.status, body: parsed };
}
