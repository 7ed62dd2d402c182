import { transportOf } from '@ccp/api';

/**
 * The install and `ccp init` lines are built from this page's own address, which need not be PUBLIC_API_URL (the
 * gateway's warnings follow that one). When the page came over plain HTTP off the loopback, what those lines
 * fetch and send travels in the clear too, and the page itself, ccp's checksum on it included, may have been
 * changed on its way.
 */
export function pageInTheClearWarning(origin: string): string | null {
  if (transportOf(origin) !== 'plain_http') return null;
  return (
    `This page came over plain HTTP (${origin}), and the install and ccp init lines use its address: anyone ` +
    "on the network path can change what this page shows, ccp's checksum included, replace the install script, " +
    'and read the password ccp init sends. Open the portal at its https:// address, or ask your administrator to ' +
    'put the gateway behind TLS (https).'
  );
}
