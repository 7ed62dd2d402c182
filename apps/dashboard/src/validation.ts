import { ApiError } from '@ccp/api';
import type { TSchema } from 'typebox';
import { Value } from 'typebox/value';

export type FieldErrors = Record<string, string>;

interface SchemaError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
}

const FORMATS: Record<string, string> = {
  'date-time': 'date and time',
  uuid: 'UUID',
  ipv4: 'IP address',
  ipv6: 'IP address',
};

function describe(error: SchemaError, schema: TSchema | undefined): string {
  const description = (schema as { description?: string } | undefined)?.description;
  const { params } = error;
  switch (error.keyword) {
    case 'required':
      return 'Required';
    case 'minLength':
      return params.limit === 1 ? 'Required' : (description ?? `At least ${params.limit} characters`);
    case 'maxLength':
      return `At most ${params.limit} characters`;
    case 'pattern':
      return description ?? 'Not in the expected form';
    case 'minimum':
    case 'maximum':
      return error.instancePath.endsWith('port')
        ? 'A port from 1 to 65535'
        : `Must be ${params.comparison} ${params.limit}`;
    case 'format':
      return `Not a valid ${FORMATS[params.format as string] ?? String(params.format)}`;
    case 'type':
      return params.type === 'integer' || params.type === 'number' ? 'A number is needed' : 'Required';
    default:
      return description ?? 'Invalid value';
  }
}

/** Walks a JSON pointer through a schema's properties to find the schema of one field. */
function fieldSchema(schema: TSchema, pointer: string): TSchema | undefined {
  let node: unknown = schema;
  for (const part of pointer.split('/').filter(Boolean)) {
    const properties = (node as { properties?: Record<string, unknown> }).properties;
    node = properties?.[part];
    if (!node) return undefined;
  }
  return node as TSchema;
}

/**
 * Checks a form's value against the API's own request schema, so the browser and the gateway agree on the rules;
 * the first problem of each field is kept, keyed by dotted path as in the API's error details.
 */
export function validate(schema: TSchema, value: unknown): FieldErrors {
  const errors: FieldErrors = {};
  for (const error of Value.Errors(schema, value) as Iterable<SchemaError>) {
    if (error.keyword === 'anyOf' || error.keyword === 'required') {
      if (error.keyword === 'required') {
        for (const name of (error.params.requiredProperties as string[] | undefined) ?? []) {
          const key = [...error.instancePath.split('/').filter(Boolean), name].join('.');
          errors[key] ??= 'Required';
        }
      }
      continue;
    }
    const key = error.instancePath.split('/').filter(Boolean).join('.');
    if (errors[key]) continue;
    const target = fieldSchema(schema, error.instancePath);
    // A union field (expires_at: timestamp or null) reports each branch; the first branch says what is wrong.
    errors[key] = describe(error, target && 'anyOf' in target ? (target.anyOf as TSchema[])[0] : target);
  }
  return errors;
}

/** The API's per-field messages (400 details), keyed like the local ones so they show beside the same field. */
export function apiFieldErrors(error: unknown): FieldErrors {
  if (!(error instanceof ApiError)) return {};
  return Object.fromEntries((error.body.details ?? []).map((d) => [d.field, d.message]));
}
