import type { IncomingHttpHeaders } from 'node:http';

/** The cookie that carries a `?token=` for the rest of one host's desktop (web client files and its stream). */
export const VNC_COOKIE = 'ccp_vnc';

export type Portal = 'admin' | 'user';
export type TokenSource = 'header' | 'query' | 'cookie';

/** The URL prefix of one host's desktop; the cookie is scoped to it. */
export const vncBasePath = (portal: Portal, hostId: string) => `/v1/${portal}/hosts/${hostId}/vnc/`;

/** noVNC's page below a prefix, connecting at once to the stream under the same prefix (so the same cookie). */
export const vncPagePath = (basePath: string) =>
  `${basePath}vnc.html?autoconnect=true&resize=scale&path=${basePath.slice(1)}websockify`;

/**
 * The token of a desktop request: `Authorization: Bearer`, then `?token=`, then the cookie. A malformed
 * Authorization header is not passed over for a cookie: it yields no token.
 */
export function desktopToken(
  headers: IncomingHttpHeaders,
  query: URLSearchParams,
): { token: string; source: TokenSource } | null {
  if (headers.authorization) {
    const match = /^Bearer\s+(\S+)$/i.exec(headers.authorization);
    return match ? { token: match[1]!, source: 'header' } : null;
  }
  const fromQuery = query.get('token');
  if (fromQuery) return { token: fromQuery, source: 'query' };
  const fromCookie = cookieValue(headers.cookie, VNC_COOKIE);
  return fromCookie ? { token: fromCookie, source: 'cookie' } : null;
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim() || null;
  }
  return null;
}

/** HttpOnly (scripts never see it), Strict (no cross-site request carries it), scoped to one host's desktop. */
export function vncCookie(token: string, basePath: string, secure: boolean): string {
  return `${VNC_COOKIE}=${token}; Path=${basePath}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
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
 * Without an Origin (not a browser) the token must have come with the request itself, not from the cookie.
 */
export function originAllowed(
  headers: IncomingHttpHeaders,
  publicApiUrl: string,
  source: TokenSource,
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
