import { EnvHttpProxyAgent, fetch } from 'undici';
import { NetworkError } from './errors.js';

// Reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY (either case), as curl does.
const dispatcher = new EnvHttpProxyAgent();

export interface JsonAnswer {
  status: number;
  body: unknown;
}

/** One JSON request to the gateway; a transport failure or time-out is a NetworkError. */
export async function postJson(url: string, body: unknown, timeoutMs = 30_000): Promise<JsonAnswer> {
  let response: Awaited<ReturnType<typeof fetch>>;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'ccp-cli' },
      body: JSON.stringify(body),
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
