/**
 * The one reading of `Authorization: Bearer <token>` (the API and the desktop proxy both use it): undefined when
 * the header is absent, null when it is there but is not a bearer token, which callers must not pass over for
 * another credential.
 */
export function bearerToken(authorization: string | undefined): string | null | undefined {
  if (!authorization) return undefined;
  const match = /^Bearer\s+(\S+)$/i.exec(authorization);
  return match ? match[1]! : null;
}
