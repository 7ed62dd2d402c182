/**
 * How what users fetch from or send to a URL travels: over TLS, never off the machine it runs on, or over a
 * network in the clear. Only the last lets a man in the middle read passwords and replace what users run.
 */
export type Transport = 'https' | 'loopback' | 'plain_http';

/**
 * A loopback http:// URL needs no TLS: it is reachable only from the machine itself, so no one on a network path
 * can read or change what it carries. Private (LAN) addresses are networks like any other. Pure, for the gateway
 * and the browser alike: the URL parser already writes every loopback address in one form (`127.1` and
 * `2130706433` as 127.0.0.1, `[0::1]` as [::1], an IPv4-mapped one as [::ffff:7f00:1]).
 */
export function transportOf(url: string): Transport {
  const { protocol, hostname } = new URL(url);
  if (protocol === 'https:') return 'https';
  const loopback =
    hostname === 'localhost' ||
    /^127\.\d+\.\d+\.\d+$/.test(hostname) ||
    hostname === '[::1]' ||
    /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(hostname);
  return loopback ? 'loopback' : 'plain_http';
}
