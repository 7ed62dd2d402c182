import Type, { type Static } from 'typebox';
import { positiveWhole, wholeNumber } from '../../shared/settings.js';

/** Port sharing: where shared web apps of workspaces are served (docs/access.md, "Shared ports"). */
export const SharesVariables = Type.Object({
  SHARE_DOMAIN: Type.String({
    default: '',
    typeText: 'host name',
    description:
      'Wildcard domain of shared ports: each share at `<label>.$SHARE_DOMAIN` on `HTTP_PORT` (DNS `*.$SHARE_DOMAIN` to this machine); empty: `SHARE_PORTS`',
  }),
  SHARE_PORTS: Type.String({
    default: '',
    typeText: 'first-last',
    description:
      'Where no DNS is available: a range of ports (e.g. `8101-8120`) this gateway listens on, one share each, an origin apart from the dashboard; empty with no `SHARE_DOMAIN`: sharing is off',
  }),
  SHARES_PER_HOST: positiveWhole(5, 'Shared ports one host may have at once'),
  SHARE_BYTES_PER_SECOND: wholeNumber(
    8 * 1024 * 1024,
    'Bytes per second through one share, both ways together (`0`: no limit)',
  ),
  SHARE_LINK_MAX_HOURS: positiveWhole(168, 'Longest lifetime of a share link, in hours'),
});
export type SharesVariables = Static<typeof SharesVariables>;

/** Where shares are served and their limits. */
export interface ShareSettings {
  /** SHARE_DOMAIN, lowercase, or null. */
  domain: string | null;
  /** SHARE_PORTS, or null. */
  ports: { first: number; last: number } | null;
  perHost: number;
  bytesPerSecond: number;
  linkMaxSeconds: number;
}

export function shareSettings(variables: SharesVariables, problems: string[]): ShareSettings {
  const domain = variables.SHARE_DOMAIN.trim().toLowerCase().replace(/\.$/, '') || null;
  if (domain && !/^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{1,63}$/.test(domain))
    problems.push(
      `SHARE_DOMAIN must be a host name such as apps.example.com (got "${variables.SHARE_DOMAIN}")`,
    );
  let ports: ShareSettings['ports'] = null;
  const range = variables.SHARE_PORTS.trim();
  if (range) {
    const match = /^(\d{1,5})-(\d{1,5})$/.exec(range);
    const first = Number(match?.[1]);
    const last = Number(match?.[2]);
    if (!match || first < 1 || last > 65535 || first > last || last - first >= 1000)
      problems.push(
        `SHARE_PORTS must be a range of at most 1000 ports such as 8101-8120 (got "${variables.SHARE_PORTS}")`,
      );
    else ports = { first, last };
  }
  return {
    domain,
    ports,
    perHost: variables.SHARES_PER_HOST,
    bytesPerSecond: variables.SHARE_BYTES_PER_SECOND,
    linkMaxSeconds: variables.SHARE_LINK_MAX_HOURS * 3600,
  };
}
