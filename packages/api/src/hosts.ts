import Type from 'typebox';
import { NullableTimestamp, ShortId, Timestamp, Uuid } from './common.js';
import { HostEgressState } from './egress-budgets.js';
import { EffectiveEgressPolicy } from './egress-policy.js';
import { HostLifecycleState } from './lifecycle-policy.js';
import { NodeName } from './nodes.js';
import { HostResources, HostResourcesRequest, ResourceAlert } from './resources.js';

export const HostStatus = Type.Union([
  Type.Literal('created'),
  Type.Literal('starting'),
  Type.Literal('running'),
  Type.Literal('stopping'),
  Type.Literal('stopped'),
  Type.Literal('rebuilding'),
  Type.Literal('failed'),
  Type.Literal('node_unavailable'),
]);

export const HostBinding = Type.Object({
  id: Uuid,
  egress_ip_id: Uuid,
  label: Type.String(),
  ip_address: Type.String(),
  active: Type.Boolean({
    description: 'true for the binding that carries the traffic; the others are standby',
  }),
});

export const Host = Type.Object({
  id: Uuid,
  short_id: ShortId,
  user_id: Uuid,
  username: Type.String(),
  status: HostStatus,
  image: Type.Union([Type.String(), Type.Null()], {
    description: 'Workspace image the container was made from',
  }),
  bindings: Type.Array(HostBinding),
  node: Type.Union([NodeName, Type.Null()], {
    description: 'The gateway node whose engine holds the workspace and its home',
  }),
  access_command: Type.String({ description: 'curl -fsSL <entry base>/entry/<short_id> | sh' }),
  access_warning: Type.Union([Type.String(), Type.Null()], {
    description:
      'What to tell users when the access command fetches its script or sends the password over plain HTTP ' +
      'off the loopback (its script prints the same first); null when both are protected',
  }),
  entry_url: Type.String(),
  ssh_user: Type.String({ description: '<username>+<short_id>' }),
  ssh_host: Type.String(),
  ssh_port: Type.Integer(),
  vnc_url: Type.String(),
  last_error: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  updated_at: Timestamp,
  started_at: NullableTimestamp,
  resources: HostResources,
  resource_alerts: Type.Array(ResourceAlert, {
    description:
      'What runs short on the running host now (memory near its limit or OOM kills, a nearly full home)',
  }),
  lifecycle: HostLifecycleState,
  egress: HostEgressState,
  egress_policy: EffectiveEgressPolicy,
});

export const HostSshDetails = Type.Object({
  ssh_user: Type.String(),
  ssh_pass: Type.String(),
  ssh_host: Type.String(),
  ssh_port: Type.Integer(),
});

export const CreateHostRequest = Type.Object(
  {
    user_id: Uuid,
    egress_ip_id: Type.Optional(Uuid),
    node: Type.Optional(NodeName),
    resources: Type.Optional(HostResourcesRequest),
  },
  { additionalProperties: false },
);

export const CreatedHost = Type.Intersect([Host, Type.Object({ ssh: HostSshDetails })]);

export const HostList = Type.Object({ hosts: Type.Array(Host) });

export const TaskAccepted = Type.Object({ task_id: Uuid, status_url: Type.String() });

export const Binding = Type.Object({ id: Uuid, host_id: Uuid, egress_ip_id: Uuid, created_at: Timestamp });

export const CreateBindingRequest = Type.Object(
  { host_id: Uuid, egress_ip_id: Uuid },
  { additionalProperties: false },
);

export const TaskStatus = Type.Union([
  Type.Literal('pending'),
  Type.Literal('running'),
  Type.Literal('succeeded'),
  Type.Literal('failed'),
]);

export const Task = Type.Object({
  id: Uuid,
  kind: Type.String({
    description:
      'start, stop, rebuild, bootstrap, remove (a host deleted at a gateway other than its node), or image-build (on no host: host_id is null)',
  }),
  host_id: Type.Union([Uuid, Type.Null()]),
  node: Type.Union([Type.String(), Type.Null()], {
    description: 'The node that runs it: the host’s node, or the gateway that took an image build',
  }),
  user_id: Type.Union([Uuid, Type.Null()]),
  status: TaskStatus,
  progress: Type.Integer({ minimum: 0, maximum: 100 }),
  stage: Type.String(),
  message: Type.String(),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()], {
    description: 'Why the task failed; code `cancelled` when a stop or delete of the host ended a start',
  }),
  requested_by: Type.String(),
  created_at: Timestamp,
  started_at: NullableTimestamp,
  finished_at: NullableTimestamp,
});

export const TaskList = Type.Object({ tasks: Type.Array(Task) });

/** The `message` of a start or bootstrap task that found the host running and changed nothing. */
export const ALREADY_RUNNING = 'already running';

export const TaskQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
  status: Type.Optional(TaskStatus),
  host_id: Type.Optional(Uuid),
});

export type HostStatus = Type.Static<typeof HostStatus>;
export type Host = Type.Static<typeof Host>;
export type HostBinding = Type.Static<typeof HostBinding>;
export type CreatedHost = Type.Static<typeof CreatedHost>;
export type Binding = Type.Static<typeof Binding>;
export type Task = Type.Static<typeof Task>;
export type TaskStatus = Type.Static<typeof TaskStatus>;
export type TaskAccepted = Type.Static<typeof TaskAccepted>;

export const ImageStatus = Type.Object({
  name: Type.Union([Type.Literal('workspace'), Type.Literal('egress-gateway')]),
  tag: Type.String({ description: 'Tag derived from a hash of the recipe; image/build.sh builds it' }),
  present: Type.Boolean(),
  created_at: Type.Union([Type.String(), Type.Null()]),
  size_bytes: Type.Union([Type.Integer(), Type.Null()]),
});

export const ImageList = Type.Object({ images: Type.Array(ImageStatus) });

export const BuildImagesRequest = Type.Object(
  {
    rebuild: Type.Optional(
      Type.Boolean({
        default: false,
        description: "false: build the missing images; true: build all again (Debian's updates)",
      }),
    ),
  },
  { additionalProperties: false },
);

export type ImageStatus = Type.Static<typeof ImageStatus>;
export type ImageList = Type.Static<typeof ImageList>;
export type BuildImagesRequest = Type.Static<typeof BuildImagesRequest>;
