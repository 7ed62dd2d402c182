import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Api } from '../api.js';

/** API answers (JSON, scripts, events) load nothing and are framed nowhere. */
const API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** The dashboard's page: its own scripts, styles and API only, framed nowhere. */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Headers every answer carries unless its route set its own (the desktop's viewer has a stricter policy of its
 * own): no MIME sniffing, no Referer leaving with tokens in URLs, a Content-Security-Policy, and HSTS when the
 * request came over TLS (directly, or through a TRUST_PROXY proxy that says so).
 */
export function registerSecurityHeaders(app: Api): void {
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply) => {
    const html = String(reply.getHeader('content-type') ?? '').startsWith('text/html');
    const ownPolicy = reply.hasHeader('content-security-policy');
    const defaults: Record<string, string> = {
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      // For browsers that predate frame-ancestors; a route with its own policy decides its framing there.
      ...(ownPolicy
        ? {}
        : { 'content-security-policy': html ? DASHBOARD_CSP : API_CSP, 'x-frame-options': 'DENY' }),
      ...(request.protocol === 'https' ? { 'strict-transport-security': 'max-age=31536000' } : {}),
    };
    for (const [name, value] of Object.entries(defaults))
      if (!reply.hasHeader(name)) reply.header(name, value);
  });
}
