import Type from 'typebox';

/** `GET /v1/cli/ccp.mjs`: the users' CLI as one JavaScript module. */
export const CliBundleBody = Type.String({
  description: 'ccp as one JavaScript module for Node.js 22 or newer',
});

/** `GET /v1/cli/ccp.mjs.sha256`. */
export const CliChecksum = Type.String({ description: '`<sha256>  ccp.mjs`, as `sha256sum -c` reads it' });

/** `GET /v1/cli/install`. */
export const CliInstaller = Type.String({
  description: 'a POSIX sh script that installs ccp, to be piped to `sh`',
});

/**
 * `GET /v1/user/cli` and `GET /v1/admin/cli`: the bundle's checksum over an authenticated call, for a user to
 * compare with what the install script checked, and whether the download travels in the clear.
 */
export const CliRelease = Type.Object({
  file_name: Type.Literal('ccp.mjs'),
  sha256: Type.String({
    pattern: '^[0-9a-f]{64}$',
    description: 'SHA-256 of the bundle this gateway serves at `/v1/cli/ccp.mjs`, lowercase hex',
  }),
  download_url: Type.String({
    description: 'Where the install script downloads it: `<PUBLIC_API_URL>/v1/cli/ccp.mjs`',
  }),
  transport: Type.Union([Type.Literal('https'), Type.Literal('loopback'), Type.Literal('plain_http')], {
    description:
      '`https`: TLS protects the download; `loopback`: an http:// URL on the gateway machine itself, which no ' +
      'network path carries; `plain_http`: anyone on the path can replace ccp and its checksum together',
  }),
  warning: Type.Union([Type.String(), Type.Null()], {
    description:
      'What to tell users about a `plain_http` download (the install script prints the same); null otherwise',
  }),
});
