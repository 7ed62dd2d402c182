import { BlockList, isIP } from 'node:net';

/**
 * How what users fetch from the gateway (ccp, its checksum, the scripts they pipe to `sh`) travels: over TLS,
 * never off this machine, or over a network in the clear. Only the last lets a man in the middle replace ccp
 * and the checksum that vouches for it together.
 */
export type DownloadTransport = 'https' | 'loopback' | 'plain_http';

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/**
 * A loopback http:// URL is not warned about: it is reachable only from this machine, so no one on a network
 * path can change what it serves. Private (LAN) addresses are networks like any other.
 */
export function downloadTransportOf(url: string): DownloadTransport {
  const { protocol, hostname } = new URL(url);
  if (protocol === 'https:') return 'https';
  const host = hostname.replace(/^\[(.*)\]$/, '$1');
  const family = isIP(host);
  const onThisMachine =
    host === 'localhost' || (family !== 0 && loopback.check(host, family === 4 ? 'ipv4' : 'ipv6'));
  return onThisMachine ? 'loopback' : 'plain_http';
}

/** What users are told where they get ccp (the install script, the portal) when it comes in the clear. */
export function plainHttpWarning(apiUrl: string): string | null {
  if (downloadTransportOf(apiUrl) !== 'plain_http') return null;
  return (
    `This gateway serves ccp over plain HTTP (${apiUrl}): anyone on the network path can replace ccp ` +
    'together with the checksum it is checked against. Compare the checksum the install prints with the one ' +
    'the portal shows after you sign in, and ask your administrator to put the gateway behind TLS (https).'
  );
}

/** The start-up line for the administrator, who can fix it. */
export function plainHttpNotice(apiUrl: string): string | null {
  if (downloadTransportOf(apiUrl) !== 'plain_http') return null;
  return (
    `PUBLIC_API_URL ${apiUrl} is plain HTTP: passwords, tokens, ccp and the scripts users pipe to sh cross the ` +
    'network unprotected, and anyone on the path can replace them; put the gateway behind TLS with ' +
    'deploy/nginx.conf and set PUBLIC_API_URL to its https:// address (docs/install.md, Production)'
  );
}
