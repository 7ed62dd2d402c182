import http, { type IncomingHttpHeaders } from 'node:http';

/**
 * One HTTP request exactly as given, without fetch's own handling (redirects followed, cookies, Set-Cookie
 * folded): what the desktop tests need to see of the gateway's answer.
 */
export function rawRequest(
  url: string,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const request = http.request({ host: hostname, port, path, method, headers }, (response) => {
      let body = '';
      response.on('data', (chunk) => (body += chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
      );
    });
    request.on('error', reject);
    request.end();
  });
}
