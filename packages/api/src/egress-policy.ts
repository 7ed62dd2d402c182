import Type from 'typebox';

const Action = Type.Union([Type.Literal('allow'), Type.Literal('deny')]);

/** At most this many rules in one policy: each is one routing rule in the host's egress gateway. */
export const MAX_EGRESS_RULES = 500;

/**
 * One rule of an egress policy: it matches when every field given matches (at least one is given). A domain is
 * matched on the name the workspace asked for (TLS SNI, HTTP Host); an address only on traffic without one.
 */
export const EgressRule = Type.Object(
  {
    action: Action,
    domain: Type.Optional(
      Type.String({
        pattern: '^(\\*\\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$',
        maxLength: 253,
        description:
          'A name (`example.com`, that name only) or its subdomains (`*.example.com`), lower case; a denied name also gets no DNS answer (REFUSED)',
      }),
    ),
    address: Type.Optional(
      Type.String({
        maxLength: 43,
        description: 'An IPv4 or IPv6 address, or a CIDR block (`203.0.113.0/24`)',
      }),
    ),
    port: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,5}(-[0-9]{1,5})?$',
        maxLength: 11,
        description: 'A destination port (`443`) or range (`8000-8999`)',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EgressPolicyMode = Type.Union(
  [Type.Literal('off'), Type.Literal('log-only'), Type.Literal('enforce')],
  {
    description:
      '`off`: everything; `log-only`: everything, with what the rules would block recorded; `enforce`: the rules decide',
  },
);

/**
 * What a host may reach through its upstream. `off`: everything; `log-only`: everything, with what the rules
 * would block recorded; `enforce`: rules in order, the first that matches decides, else `default_action`.
 */
export const EgressPolicy = Type.Object(
  {
    mode: EgressPolicyMode,
    default_action: Action,
    rules: Type.Array(EgressRule, {
      maxItems: MAX_EGRESS_RULES,
      description: `In order, the first that matches decides; at most ${MAX_EGRESS_RULES}`,
    }),
  },
  { additionalProperties: false },
);

export const EgressPolicySource = Type.Union(
  [Type.Literal('host'), Type.Literal('user'), Type.Literal('global'), Type.Literal('none')],
  {
    description:
      "Where the policy in force comes from: the host's own, its owner's default, the gateway's (EGRESS_POLICY), or none (everything allowed)",
  },
);

/** The policy a host follows: its own, else its owner's default, else the gateway's. */
export const EffectiveEgressPolicy = Type.Object({
  mode: EgressPolicyMode,
  default_action: Action,
  rules: Type.Array(EgressRule),
  source: EgressPolicySource,
});

const Level = (description: string) => Type.Union([EgressPolicy, Type.Null()], { description });

/** A host's egress policy at each level, the one it follows, and what is allowed before any rule. */
export const HostEgressPolicies = Type.Object({
  host: Level("The host's own policy; null: its owner's default"),
  user: Level("The owner's default for their hosts; null: the gateway's"),
  global: Level('The gateway-wide default (EGRESS_POLICY); null: everything allowed'),
  effective: EffectiveEgressPolicy,
  always_allowed: Type.Array(EgressRule, {
    description:
      "What the gateway's own path check reaches from inside the workspace (IP echoes, the DoH resolver): allowed before the rules while a policy is enforced",
  }),
});

/** A user's default egress policy for their hosts, and the gateway's under it. */
export const UserEgressPolicies = Type.Object({
  user: Level("The user's default for their hosts; null: the gateway's"),
  global: Level('The gateway-wide default (EGRESS_POLICY); null: everything allowed'),
});

export type EgressRule = Type.Static<typeof EgressRule>;
export type EgressPolicy = Type.Static<typeof EgressPolicy>;
export type EgressPolicySource = Type.Static<typeof EgressPolicySource>;
export type EffectiveEgressPolicy = Type.Static<typeof EffectiveEgressPolicy>;
export type HostEgressPolicies = Type.Static<typeof HostEgressPolicies>;
export type UserEgressPolicies = Type.Static<typeof UserEgressPolicies>;
