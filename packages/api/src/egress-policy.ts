import Type from 'typebox';

const Action = Type.Union([Type.Literal('allow'), Type.Literal('deny')]);

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
        description: 'A name (`example.com`, that name only) or its subdomains (`*.example.com`), lower case',
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
        description: 'A destination port (`443`) or range (`8000-8999`)',
      }),
    ),
  },
  { additionalProperties: false },
);

/**
 * What a host may reach through its upstream. `off`: everything; `log-only`: everything, with what the rules
 * would block recorded; `enforce`: rules in order, the first that matches decides, else `default_action`.
 */
export const EgressPolicy = Type.Object(
  {
    mode: Type.Union([Type.Literal('off'), Type.Literal('log-only'), Type.Literal('enforce')]),
    default_action: Action,
    rules: Type.Array(EgressRule, { maxItems: 500 }),
  },
  { additionalProperties: false },
);

export type EgressRule = Type.Static<typeof EgressRule>;
export type EgressPolicy = Type.Static<typeof EgressPolicy>;
