import Type, { type Static, type TObject, type TSchema } from 'typebox';
import Format from 'typebox/format';
import Value from 'typebox/value';

/**
 * The vocabulary of the gateway's settings. Each part declares the environment variables it reads as one TypeBox
 * object (`<part>/settings.ts`): a property per variable, with its type, bounds or format, its default and a
 * one-line description, plus what the operator is told when it is wrong. `config.ts` reads them all with
 * `readVariables`, and docs/configuration.md is written from them (`npm run docs:config`).
 */
export interface VariableNotes {
  /** One line for the operator: what it sets. */
  description: string;
  /**
   * What is wrong, after the variable's name, when the value fails its schema: `{got}` is the text given,
   * `{bad}` the entries of a list that failed.
   */
  problem?: string;
  /** Said after the name when a required variable is unset (the default: "is required"). */
  missing?: string;
  /** The type, in the docs, of a variable whose checks are not all in its schema. */
  typeText?: string;
  /** The default, in the docs, of a variable whose default is worked out from other settings. */
  defaultText?: string;
  /** A password or key: the docs never show a value of it. */
  secret?: boolean;
  /** An empty value is a value of its own, not "unset" (which takes the default). */
  keepsEmpty?: boolean;
}

/** A variable's schema as this vocabulary reads it: TypeBox's keywords and the notes above. */
type Variable = TSchema &
  VariableNotes & {
    type?: string;
    default?: unknown;
    items?: TSchema;
    anyOf?: { const?: unknown }[];
    format?: string;
    pattern?: string;
    minimum?: number;
    maximum?: number;
    exclusiveMinimum?: number;
    minLength?: number;
  };

type Env = Record<string, string | undefined>;

/** A TCP port; `0` too when `allowZero` (a free one for tests, or off: the description says which). */
export const port = (fallback: number, description: string, allowZero = false) =>
  Type.Integer({
    minimum: allowZero ? 0 : 1,
    maximum: 65535,
    default: fallback,
    description,
    problem: `must be a port number${allowZero ? ' (0 turns it off)' : ''} (got "{got}")`,
  });

export const positiveWhole = (fallback: number, description: string) =>
  Type.Integer({
    minimum: 1,
    default: fallback,
    description,
    problem: 'must be a positive whole number (got "{got}")',
  });

export const wholeNumber = (fallback: number, description: string) =>
  Type.Integer({
    minimum: 0,
    default: fallback,
    description,
    problem: 'must be a whole number, 0 or more (got "{got}")',
  });

export const positiveNumber = (fallback: number, description: string) =>
  Type.Number({
    exclusiveMinimum: 0,
    default: fallback,
    description,
    problem: 'must be a positive number (got "{got}")',
  });

/** `host:port` (an IPv6 host in brackets), as METRICS_BIND and INTERNAL_BIND take it. */
export const hostPort = (description: string, defaultText?: string) =>
  Type.Optional(
    Type.String({
      format: 'host-port',
      description,
      ...(defaultText ? { defaultText } : {}),
      problem: 'must be an address and port such as 127.0.0.1:9464 (got "{got}")',
    }),
  );

/** The address and port of a `hostPort` variable already read (checked: the port is at most 65535). */
export function parseHostPort(text: string | undefined): { host: string; port: number } | null {
  const match = text ? /^(.+):(\d{1,5})$/.exec(text.trim()) : null;
  if (!match || Number(match[2]) > 65535) return null;
  return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port: Number(match[2]) };
}

/** The words docs/configuration.md uses for each format the settings define. */
const formatWords = new Map<string, string>();

/** A string format for settings: TypeBox checks values with `check`, the docs call it `words`. */
export function defineFormat(name: string, words: string, check: (text: string) => boolean): void {
  Format.Set(name, check);
  formatWords.set(name, words);
}

defineFormat('host-port', 'host:port', (text) => parseHostPort(text) !== null);

/**
 * The values of `variables` from `env`, each as its schema's type: unset (or empty) is the default, a value
 * that fails its schema is one more line in `problems`, so that every mistake is reported in one pass.
 */
export function readVariables<T extends TObject>(variables: T, env: Env, problems: string[]): Static<T> {
  const values: Record<string, unknown> = {};
  const required = new Set<string>(variables.required ?? []);
  for (const [name, schema] of Object.entries(variables.properties as Record<string, Variable>)) {
    const text = env[name];
    if (text === undefined || (text === '' && !schema.keepsEmpty)) {
      if (schema.default !== undefined) values[name] = structuredClone(schema.default);
      else if (required.has(name)) problems.push(`${name} ${schema.missing ?? 'is required'}`);
      continue;
    }
    const value = fromText(schema, text);
    if (Value.Check(schema, value)) {
      values[name] = value;
      continue;
    }
    problems.push(problemOf(name, schema, text, value));
    // The default stands in; without one, a text stays as given, so checks between variables see it set.
    if (schema.default !== undefined) values[name] = structuredClone(schema.default);
    else if (schema.type === 'string') values[name] = text;
  }
  return values as Static<T>;
}

/** Checks a value worked out from others (a default computed from other settings) against its variable. */
export function checkVariable(variables: TObject, name: string, value: unknown, problems: string[]): void {
  const schema = (variables.properties as Record<string, Variable>)[name]!;
  if (!Value.Check(schema, value)) problems.push(problemOf(name, schema, String(value), value));
}

function fromText(schema: Variable, text: string): unknown {
  if (schema.type === 'integer' || schema.type === 'number') return Number(text);
  if (schema.type === 'array')
    return text
      .split(',')
      .map((entry) => entry.trim())
      .filter(Boolean);
  return text;
}

function problemOf(name: string, schema: Variable, text: string, value: unknown): string {
  const bad =
    Array.isArray(value) && schema.items
      ? value.filter((entry) => !Value.Check(schema.items!, entry)).join(', ')
      : '';
  const problem = (schema.problem ?? 'is not valid (got "{got}")')
    .replaceAll('{got}', text)
    .replaceAll('{bad}', bad);
  return `${name} ${problem}`;
}

/** One variable as docs/configuration.md lists it. */
export interface VariableDoc {
  name: string;
  type: string;
  default: string;
  description: string;
}

export function describeVariables(variables: TObject): VariableDoc[] {
  return Object.entries(variables.properties as Record<string, Variable>).map(([name, schema]) => ({
    name,
    type: typeOf(schema),
    default: defaultOf(name, schema, new Set<string>(variables.required ?? [])),
    description: schema.description,
  }));
}

function typeOf(schema: Variable): string {
  if (schema.typeText) return schema.typeText;
  if (schema.anyOf) return schema.anyOf.map((option) => String(option.const)).join(', ');
  if (schema.type === 'array')
    return `comma-separated: ${schema.items ? typeOf(schema.items as Variable) : 'text'}`;
  if (schema.type === 'integer' || schema.type === 'number') {
    const kind = schema.type === 'integer' ? 'whole number' : 'number';
    if (schema.minimum !== undefined && schema.maximum !== undefined)
      return `${kind}, ${schema.minimum} to ${schema.maximum}`;
    if (schema.minimum !== undefined) return `${kind}, ${schema.minimum} or more`;
    if (schema.exclusiveMinimum !== undefined) return `${kind}, more than ${schema.exclusiveMinimum}`;
    return kind;
  }
  if (schema.format) return formatWords.get(schema.format) ?? schema.format;
  if (schema.minLength !== undefined) return `text, ${schema.minLength} characters or more`;
  return 'text';
}

function defaultOf(name: string, schema: Variable, required: Set<string>): string {
  if (schema.secret) return required.has(name) ? '(required)' : '(none)';
  if (schema.defaultText !== undefined) return schema.defaultText;
  if (schema.default === undefined) return required.has(name) ? '(required)' : '(none)';
  if (Array.isArray(schema.default))
    return schema.default.length ? `\`${schema.default.join(',')}\`` : '(empty)';
  return `\`${String(schema.default)}\``;
}
