import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../domain/errors.js';
import { bearerToken } from '../shared/bearer-token.js';

export type Portal = 'admin' | 'user';

/**
 * How a desktop request proves itself: an API token in the Authorization header (API clients); a one-time
 * ticket in the page's address (a browser's first request, which cannot carry a header); or the desktop pass in
 * the path prefix the ticket redirected to (the page's own requests and its stream, all relative to it). An API
 * token is never taken from a URL. No cookie: cookies ignore ports, so any page on another port of the same host
 * (a shared app of a workspace, SHARE_PORTS) would send it with its own requests.
 */
export type DesktopCredential =
  | { kind: 'header'; token: string }
  | { kind: 'ticket'; ticket: string }
  | { kind: 'pass'; pass: string };

/** The URL prefix of one host's desktop. */
export const vncBasePath = (portal: Portal, hostId: string) => `/v1/${portal}/hosts/${hostId}/vnc/`;

/** The prefix a desktop pass opens: the page, its files and its stream below it carry the pass in their path. */
export const vncPassPath = (basePath: string, pass: string) => `${basePath}pass/${pass}/`;

/** The viewer page below a prefix, connecting at once to the stream under the same prefix (so the same pass). */
export const vncPagePath = (basePath: string) =>
  `${basePath}vnc.html?autoconnect=true&resize=scale&path=${basePath.slice(1)}websockify`;

/** The address of a host's desktop page in one portal: the `vnc_url` of the host's view. */
export const desktopPageUrl = (publicApiUrl: string, portal: Portal, hostId: string) =>
  `${publicApiUrl}${vncPagePath(vncBasePath(portal, hostId))}`;

/**
 * The credential of a desktop request and the rest of its path below the desktop's prefix: `Authorization:
 * Bearer`, then `?ticket=`, then a pass in the path (`pass/<pass>/…`). A malformed Authorization header is not
 * passed over for anything else: it yields none. `?token=` is refused outright. Cookies are never read.
 */
export function desktopCredential(
  headers: IncomingHttpHeaders,
  query: URLSearchParams,
  rest: string,
): { credential: DesktopCredential | null; rest: string } {
  if (query.has('token'))
    throw errors.unauthorized(
      'API tokens do not go in URLs: send the Authorization header, or open the desktop with a ticket ' +
        '(POST …/vnc/ticket)',
    );
  const inPath = /^pass\/([A-Za-z0-9._-]+)\/(.*)$/s.exec(rest);
  const file = inPath ? inPath[2]! : rest;
  const token = bearerToken(headers.authorization);
  if (token !== undefined)
    return { credential: token === null ? null : { kind: 'header', token }, rest: file };
  const ticket = query.get('ticket');
  if (ticket) return { credential: { kind: 'ticket', ticket }, rest: file };
  return { credential: inPath ? { kind: 'pass', pass: inPath[1]! } : null, rest: file };
}

/**
 * The file a web client request names below the desktop's prefix, or null when it is not a plain relative path
 * (traversal, encoded characters, backslashes, empty segments). noVNC's files need nothing more.
 */
export function desktopFilePath(rest: string): string | null {
  if (!/^[A-Za-z0-9._/-]*$/.test(rest)) return null;
  if (rest.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) return null;
  return `/${rest}`;
}

/**
 * Browsers send Origin on every WebSocket; a page of another origin (a shared app on another port of the same
 * host, another site) opens no desktop stream, whatever it knows. Allowed: the gateway's public origin, or the
 * origin the request was addressed to. Without an Origin (not a browser) the credential came with the request.
 */
export function originAllowed(headers: IncomingHttpHeaders, publicApiUrl: string): boolean {
  const origin = headers.origin;
  if (!origin) return true;
  let given: URL;
  try {
    given = new URL(origin);
  } catch {
    return false;
  }
  if (given.origin === new URL(publicApiUrl).origin) return true;
  return typeof headers.host === 'string' && given.host === headers.host.toLowerCase();
}
