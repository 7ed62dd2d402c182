/** The page loads nothing, runs nothing, posts nowhere and is framed nowhere. */
const PRIVATE_PAGE_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const ESCAPED: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => ESCAPED[c]!);

/**
 * What a browser opening a share's origin without its pass is shown (status 401): that the share is private and
 * opens from the portal, with the portal's address. It says nothing of the share (owner, host, port) that the
 * origin does not, and sets no cookie.
 */
export function privateSharePage(portalUrl: string): { headers: Record<string, string>; body: string } {
  const portal = escapeHtml(portalUrl);
  const body = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>This share is private</title>
</head>
<body>
<h1>This share is private</h1>
<p>It opens only for the people it is shared with. Sign in to the portal and open it there, under
<strong>Shared with me</strong> on the host list (or your own host's Shared ports):</p>
<p><a href="${portal}">${portal}</a></p>
<p>If you were given a link to it, open that link itself.</p>
</body>
</html>
`;
  return {
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'content-length': String(Buffer.byteLength(body)),
      'cache-control': 'no-store',
      'content-security-policy': PRIVATE_PAGE_CSP,
      'x-content-type-options': 'nosniff',
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
    },
    body,
  };
}
