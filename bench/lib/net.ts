import { waitUntilListening } from '../../apps/gateway/src/egress/loopback-ports.js';

export { freeLoopbackPort as freePort } from '../../apps/gateway/src/egress/loopback-ports.js';

/** Waits until `url` answers at all (any status), polling every 100 ms for at most `timeoutMs`. */
export async function waitForHttp(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

export async function postJson(
  url: string,
  body: unknown,
  token: string | null = null,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

export async function login(baseUrl: string, username: string, password: string): Promise<string> {
  const response = await postJson(`${baseUrl}/v1/auth/login`, { username, password });
  if (response.status !== 200 || typeof response.body.token !== 'string') {
    throw new Error(`login as ${username}: HTTP ${response.status} ${JSON.stringify(response.body)}`);
  }
  return response.body.token;
}

/** Waits until something accepts TCP connections on `host:port`, for at most `timeoutMs`. */
export async function waitForPort(host: string, port: number, timeoutMs: number): Promise<void> {
  if (!(await waitUntilListening(port, Date.now() + timeoutMs, { host })))
    throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
}
