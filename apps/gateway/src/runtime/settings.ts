import Type, { type Static } from 'typebox';
import { positiveNumber, positiveWhole } from '../shared/settings.js';

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
  WORKSPACE_MEMORY_MB: positiveWhole(2048, 'Memory limit of each workspace container, in MiB'),
  WORKSPACE_CPUS: positiveNumber(1, 'CPU limit of each workspace container (fractions allowed)'),
  WORKSPACE_PIDS: positiveWhole(1024, 'Process limit of each workspace container'),
});
export type RuntimeVariables = Static<typeof RuntimeVariables>;
