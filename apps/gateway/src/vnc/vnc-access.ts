import type { IncomingHttpHeaders } from 'node:http';
import { errors } from '../domain/errors.js';
import { bearerToken } from '../shared/bearer-token.js';

/** The cookie that carries the desktop pass of one host (its web client's files and its stream). */
export const VNC_COOKIE = 'ccp_vnc';

export type Portal = 'admin' | 'user';

/**
 * How a desktop request proves itself: an API token in the Authorization header (API clients); a one-time
 * ticket in the page's address (a browser's first request, which cannot carry a header); or the desktop pass in
 * the host's cookie (the page's own requests and its stream). An API token is never taken from a URL.
 */
export type DesktopCredential =
  | { kind: 'header'; token: string }
  | { kind: 'ticket'; ticket: string }
  | { kind: 'cookie'; pass: string };

/** The URL prefix of one host's desktop; the cookie is scoped to it. */
export const vncBasePath = (portal: Portal, hostId: string) => `/v1/${portal}/hosts/${hostId}/vnc/`;

/** The viewer page below a prefix, connecting at once to the stream under the same prefix (so the same cookie). */
export const vncPagePath = (basePath: string) =>
  `${basePath}vnc.html?autoconnect=true&resize=scale&path=${basePath.slice(1)}websockify`;

/** The address of a host's desktop page in one portal: the `vnc_url` of the host's view. */
export const desktopPageUrl = (publicApiUrl: string, portal: Portal, hostId: string) =>
  `${publicApiUrl}${vncPagePath(vncBasePath(portal, hostId))}`;

/**
 * The credential of a desktop request: `Authorization: Bearer`, then `?ticket=`, then the cookie. A malformed
 * Authorization header is not passed over for anything else: it yields none. `?token=` is refused outright.
 */
export function desktopCredential(
  headers: IncomingHttpHeaders,
  query: URLSearchParams,
): DesktopCredential | null {
  if (query.has('token'))
    throw errors.unauthorized(
      'API tokens do not go in URLs: send the Authorization header, or open the desktop with a ticket ' +
        '(POST …/vnc/ticket)',
    );
  const token = bearerToken(headers.authorization);
  if (token !== undefined) return token === null ? null : { kind: 'header', token };
  const ticket = query.get('ticket');
  if (ticket) return { kind: 'ticket', ticket };
  const pass = cookieValue(headers.cookie, VNC_COOKIE);
  return pass ? { kind: 'cookie', pass } : null;
}

/** A request's address without its ticket, every other parameter as it was written (as URLSearchParams reads
 * names, so that no spelling of `ticket` stays behind). */
export function withoutTicket(url: string): string {
  const at = url.indexOf('?');
  if (at < 0) return url;
  const kept = url
    .slice(at + 1)
    .split('&')
    .filter((pair) => pair !== '' && new URLSearchParams(pair).keys().next().value !== 'ticket');
  return kept.length > 0 ? `${url.slice(0, at)}?${kept.join('&')}` : url.slice(0, at);
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim() || null;
  }
  return null;
}

/** HttpOnly (scripts never see it), Strict (no cross-site request carries it), scoped to one host's desktop, and
 * gone with the pass it holds. */
export function vncCookie(pass: string, basePath: string, maxAgeSeconds: number, secure: boolean): string {
  return `${VNC_COOKIE}=${pass}; Path=${basePath}; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
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
 * Browsers send Origin on every WebSocket; a page of another site must not ride on the cookie (cross-site
 * WebSocket hijacking). Allowed: the gateway's public origin, or the origin the request was addressed to.
 * Without an Origin (not a browser) the credential must have come with the request itself, not from the cookie.
 */
export function originAllowed(
  headers: IncomingHttpHeaders,
  publicApiUrl: string,
  source: DesktopCredential['kind'],
): boolean {
  const origin = headers.origin;
  if (!origin) return source !== 'cookie';
  let given: URL;
  try {
    given = new URL(origin);
  } catch {
    return false;
  }
  if (given.origin === new URL(publicApiUrl).origin) return true;
  return typeof headers.host === 'string' && given.host === headers.host.toLowerCase();
}
