import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { desktopFilePath } from './vnc-access.js';

/** Our viewer page (assets/desktop) and noVNC's client library, a dependency of the gateway. */
const VIEWER_DIR = fileURLToPath(new URL('../../assets/desktop/', import.meta.url));
const NOVNC_DIR = path.dirname(path.dirname(fileURLToPath(import.meta.resolve('@novnc/novnc'))));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/**
 * A strict policy: scripts and styles only from this origin's files, the stream only to this origin, no frames of
 * other sites, no forms, no base URL; the viewer needs nothing more.
 */
export const DESKTOP_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'self'",
].join('; ');

/** The file a request below a desktop's prefix names, with its headers; null for anything else. */
export function desktopFile(rest: string): { path: string; headers: Record<string, string> } | null {
  const relative = desktopFilePath(rest)?.slice(1);
  if (!relative) return null;
  const [top] = relative.split('/');
  const root =
    top === 'core' || top === 'vendor'
      ? NOVNC_DIR
      : ['vnc.html', 'viewer.js', 'viewer.css'].includes(relative)
        ? VIEWER_DIR
        : null;
  const type = TYPES[path.extname(relative)];
  if (root === null || type === undefined) return null;
  const file = path.join(root, relative);
  if (!file.startsWith(root) || !existsSync(file)) return null;
  return {
    path: file,
    headers: {
      'content-type': type,
      'content-security-policy': DESKTOP_CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-cache',
    },
  };
}
