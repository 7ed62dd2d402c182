import { transportOf } from '@ccp/api';

/**
 * What users and the administrator are told when what users fetch from the gateway (ccp, its checksum, the
 * scripts they pipe to `sh`) or send to it (passwords) crosses a network in the clear. Which URLs do is
 * transportOf's decision (@ccp/api), the one the dashboard makes for its own address too.
 */

/** What users are told where they get ccp (the install script, the portal) when it comes in the clear. */
export function plainHttpWarning(apiUrl: string): string | null {
  if (transportOf(apiUrl) !== 'plain_http') return null;
  return (
    `This gateway serves ccp over plain HTTP (${apiUrl}): anyone on the network path can replace ccp ` +
    'together with the checksum it is checked against. Compare the checksum the install prints with the one ' +
    'the portal shows after you sign in, and ask your administrator to put the gateway behind TLS (https).'
  );
}

/**
 * What the entry and bootstrap scripts print before they ask for a password, and the portal shows beside the
 * access command, when `command` fetches its script from, or sends the password to, one of `urls` in the clear.
 */
export function passwordInTheClearWarning(command: string, urls: string[]): string | null {
  const plain = urls.find((url) => transportOf(url) === 'plain_http');
  if (plain === undefined) return null;
  return (
    `${command} goes over plain HTTP (${plain}): anyone on the network path can read the password it sends ` +
    'or replace the script it runs. On a network you do not trust, connect with the SSH line the portal shows ' +
    'instead, and ask your administrator to put the gateway behind TLS (https).'
  );
}

/** The start-up line for the administrator, who can fix it. */
export function plainHttpNotice(apiUrl: string): string | null {
  if (transportOf(apiUrl) !== 'plain_http') return null;
  return (
    `PUBLIC_API_URL ${apiUrl} is plain HTTP: passwords, tokens, ccp and the scripts users pipe to sh cross the ` +
    'network unprotected, and anyone on the path can replace them; put the gateway behind TLS with ' +
    'deploy/nginx.conf and set PUBLIC_API_URL to its https:// address (docs/install.md, Production)'
  );
}
