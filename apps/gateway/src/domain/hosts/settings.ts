import Type, { type Static } from 'typebox';
import { wholeNumber } from '../../shared/settings.js';

/** The rounds that keep running hosts in check (docs/configuration.md is written from these). */
export const HostsVariables = Type.Object({
  HOST_CHECK_SECONDS: wholeNumber(
    30,
    "How often (seconds) this node's running hosts are compared with its engine: one found not running twice in a row is `failed`; `0` turns it off",
  ),
  EGRESS_HEALTH_SECONDS: wholeNumber(
    60,
    'How often (seconds) the upstreams of running hosts are checked; `0` turns it off',
  ),
});
export type HostsVariables = Static<typeof HostsVariables>;
