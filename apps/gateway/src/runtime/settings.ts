import { RESOURCE_BOUNDS } from '@ccp/api';
import Type, { type Static } from 'typebox';
import { wholeNumber } from '../shared/settings.js';

/** A workspace resource's default, within what the engine and the API accept (RESOURCE_BOUNDS). */
const resource = (
  kind: 'whole' | 'number',
  range: { minimum: number; maximum: number },
  fallback: number,
  description: string,
) =>
  (kind === 'whole' ? Type.Integer : Type.Number)({
    ...range,
    default: fallback,
    description,
    problem: `must be ${kind === 'whole' ? 'a whole number' : 'a number'} from ${range.minimum} to ${range.maximum} (got "{got}")`,
  });

/** The container engine and what each workspace may use (docs/configuration.md is written from these). */
export const RuntimeVariables = Type.Object({
  DOCKER_SOCKET: Type.String({
    default: '/var/run/docker.sock',
    description: "The container engine's API socket",
  }),
  WORKSPACE_IMAGE_VARIANT: Type.Union([Type.Literal('full'), Type.Literal('test')], {
    default: 'full',
    description: '`full` (desktop, assistant CLI) or `test` (small image for tests)',
    problem: 'must be full or test',
  }),
  WORKSPACE_MEMORY_MB: resource(
    'whole',
    RESOURCE_BOUNDS.memory_mb,
    2048,
    'Memory limit (MiB) of a workspace whose host and owner set none (per host and per user: resources.md)',
  ),
  WORKSPACE_CPUS: resource(
    'number',
    RESOURCE_BOUNDS.cpus,
    1,
    'CPU limit of a workspace (fractions allowed), the global default',
  ),
  WORKSPACE_PIDS: resource(
    'whole',
    RESOURCE_BOUNDS.pids,
    1024,
    'Process limit of a workspace, the global default',
  ),
  WORKSPACE_HOME_MB: resource(
    'whole',
    RESOURCE_BOUNDS.home_mb,
    10240,
    'Size (MiB) of a home volume, the global default: writing past it fails inside the workspace (a sized ext4 image per home)',
  ),
  EGRESS_GATEWAY_POOL: Type.Integer({
    minimum: 0,
    maximum: 4,
    default: 1,
    description:
      'Egress gateways kept started ahead for each upstream a host started with, so the next start with it takes one instead of starting its own; `0` turns the pool off',
    problem: 'must be a whole number from 0 to 4 (got "{got}")',
  }),
  EGRESS_GATEWAY_POOL_MAX: Type.Integer({
    minimum: 0,
    maximum: 64,
    default: 8,
    description:
      'Pooled egress gateways at most, all upstreams together (each holds about 9 MiB idle, within the egress gateway limit of 256 MiB)',
    problem: 'must be a whole number from 0 to 64 (got "{got}")',
  }),
  RESOURCE_CHECK_SECONDS: wholeNumber(
    30,
    'How often running workspaces are checked for memory near its limit, memory kills and a nearly full home; `0` turns it off',
  ),
});
export type RuntimeVariables = Static<typeof RuntimeVariables>;
