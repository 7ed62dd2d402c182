import Type from 'typebox';
import { Timestamp, Uuid } from './common.js';

/** The bounds every resource value must keep, where a host is sized or a default is set. */
export const RESOURCE_BOUNDS = {
  cpus: { minimum: 0.1, maximum: 256 },
  memory_mb: { minimum: 64, maximum: 4_194_304 },
  pids: { minimum: 32, maximum: 4_194_304 },
  home_mb: { minimum: 64, maximum: 67_108_864 },
} as const;

const Cpus = Type.Number({ ...RESOURCE_BOUNDS.cpus, description: 'CPUs (fractions allowed)' });
const MemoryMb = Type.Integer({ ...RESOURCE_BOUNDS.memory_mb, description: 'Memory limit in MiB' });
const Pids = Type.Integer({ ...RESOURCE_BOUNDS.pids, description: 'Process (and thread) limit' });
const HomeMb = Type.Integer({
  ...RESOURCE_BOUNDS.home_mb,
  description: 'Size of the home volume in MiB: writing past it fails inside the workspace',
});

/** What a host runs with: its own values where set, else its owner's defaults, else the gateway's. */
export const HostResources = Type.Object({
  cpus: Cpus,
  memory_mb: MemoryMb,
  pids: Pids,
  home_mb: HomeMb,
});

/** Changes to a host's resources: a field given replaces the host's own value, null goes back to the default. */
export const HostResourcesRequest = Type.Object(
  {
    cpus: Type.Optional(Type.Union([Cpus, Type.Null()])),
    memory_mb: Type.Optional(Type.Union([MemoryMb, Type.Null()])),
    pids: Type.Optional(Type.Union([Pids, Type.Null()])),
    home_mb: Type.Optional(Type.Union([HomeMb, Type.Null()])),
  },
  { additionalProperties: false },
);

export const ResourceAlertKind = Type.Union([
  Type.Literal('memory_pressure'),
  Type.Literal('memory_oom_kill'),
  Type.Literal('home_nearly_full'),
]);

/** A resource running short on a running host, as the last check saw it (events tell its history). */
export const ResourceAlert = Type.Object({
  kind: ResourceAlertKind,
  message: Type.String(),
  since: Timestamp,
});

/** A user's defaults for new and unsized hosts; null: the gateway's (WORKSPACE_CPUS, ...). */
export const ResourceDefaults = Type.Object({
  cpus: Type.Union([Cpus, Type.Null()]),
  memory_mb: Type.Union([MemoryMb, Type.Null()]),
  pids: Type.Union([Pids, Type.Null()]),
  home_mb: Type.Union([HomeMb, Type.Null()]),
});

const QuotaCount = (description: string) =>
  Type.Union([Type.Integer({ minimum: 0, maximum: 1_000_000 }), Type.Null()], { description });

/** A user's quotas; null: unlimited. */
export const Quotas = Type.Object({
  hosts: QuotaCount('Hosts the user may have'),
  running_hosts: QuotaCount('Hosts of the user running (or starting) at once'),
  cpus: Type.Union([Type.Number({ minimum: 0, maximum: 1_000_000 }), Type.Null()], {
    description: 'CPUs of the running hosts together',
  }),
  memory_mb: QuotaCount('Memory of the running hosts together, MiB'),
  home_mb: QuotaCount('Home volumes of all hosts together, MiB'),
});

/** What a user's hosts take of each quota now. */
export const QuotaUse = Type.Object({
  hosts: Type.Integer(),
  running_hosts: Type.Integer(),
  cpus: Type.Number(),
  memory_mb: Type.Integer(),
  home_mb: Type.Integer(),
});

export const UserResources = Type.Object({
  user_id: Uuid,
  username: Type.String(),
  defaults: ResourceDefaults,
  quotas: Quotas,
  usage: QuotaUse,
});

export const UserResourcesList = Type.Object({ users: Type.Array(UserResources) });

/** Changes to a user's defaults and quotas: each field given replaces the stored one (null clears it). */
export const UserResourcesRequest = Type.Object(
  {
    defaults: Type.Optional(Type.Partial(ResourceDefaults, { additionalProperties: false })),
    quotas: Type.Optional(Type.Partial(Quotas, { additionalProperties: false })),
  },
  { additionalProperties: false },
);

/** The quotas a 409 `quota_exceeded` names. */
export const QuotaName = Type.Union([
  Type.Literal('hosts'),
  Type.Literal('running_hosts'),
  Type.Literal('cpus'),
  Type.Literal('memory_mb'),
  Type.Literal('home_mb'),
]);

export type HostResources = Type.Static<typeof HostResources>;
export type HostResourcesRequest = Type.Static<typeof HostResourcesRequest>;
export type ResourceAlert = Type.Static<typeof ResourceAlert>;
export type ResourceAlertKind = Type.Static<typeof ResourceAlertKind>;
export type ResourceDefaults = Type.Static<typeof ResourceDefaults>;
export type Quotas = Type.Static<typeof Quotas>;
export type QuotaUse = Type.Static<typeof QuotaUse>;
export type QuotaName = Type.Static<typeof QuotaName>;
export type UserResources = Type.Static<typeof UserResources>;
export type UserResourcesRequest = Type.Static<typeof UserResourcesRequest>;
