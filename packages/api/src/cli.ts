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
