/** Writes docs/api/openapi.json and docs/api-reference.md from the gateway's route schemas.
 * `--check` exits non-zero when the committed files differ from what the code generates. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../apps/gateway/src/config.js';
import { createGateway } from '../apps/gateway/src/gateway.js';

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  allOf?: Schema[];
  const?: unknown;
  enum?: unknown[];
  format?: string;
  description?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  default?: unknown;
}
interface Operation {
  operationId?: string;
  summary?: string;
  tags?: string[];
  deprecated?: boolean;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema: Schema }> }>;
}
type Document = {
  paths: Record<string, Record<string, Operation>>;
  info: { title: string; version: string };
  tags?: { name: string; description?: string }[];
};

/** Fields that take one of several object forms (`proxy_config`): listed once, after the routes. */
type Variants = Map<string, Schema[]>;

function typeOf(schema: Schema): string {
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  if (schema.anyOf) return schema.anyOf.map(typeOf).join(' \\| ');
  if (schema.type === 'array') return `${schema.items ? typeOf(schema.items) : 'any'}[]`;
  if (schema.format) return `${schema.type ?? 'string'} (${schema.format})`;
  return Array.isArray(schema.type) ? schema.type.join(' \\| ') : (schema.type ?? 'any');
}

/** Text for a table cell: a `|` would end the cell. */
const cell = (text: string) => text.replaceAll('|', '\\|');

function rules(schema: Schema): string {
  const out: string[] = [];
  if (schema.minLength !== undefined) out.push(`min length ${schema.minLength}`);
  if (schema.maxLength !== undefined) out.push(`max length ${schema.maxLength}`);
  if (schema.minimum !== undefined) out.push(`≥ ${schema.minimum}`);
  if (schema.maximum !== undefined) out.push(`≤ ${schema.maximum}`);
  if (schema.default !== undefined) out.push(`default ${JSON.stringify(schema.default)}`);
  if (schema.description) out.push(cell(schema.description));
  return out.join('; ');
}

function fieldTable(schema: Schema): string {
  const properties = schema.properties ?? {};
  const names = Object.keys(properties);
  if (names.length === 0) return '_no fields_\n';
  const rows = names.map((name) => {
    const field = properties[name]!;
    const required = schema.required?.includes(name) ? 'yes' : 'no';
    return `| \`${name}\` | ${typeOf(field)} | ${required} | ${rules(field)} |`;
  });
  return ['| Field | Type | Required | Rules |', '|---|---|---|---|', ...rows, ''].join('\n');
}

/** An object's own fields, the fields of an allOf merged in. */
function objectOf(schema: Schema): Schema | null {
  if (schema.allOf) {
    const parts = schema.allOf.map(objectOf).filter((part): part is Schema => part !== null);
    return {
      type: 'object',
      properties: Object.assign({}, ...parts.map((part) => part.properties)),
      required: parts.flatMap((part) => part.required ?? []),
    };
  }
  if (schema.properties) return schema;
  // An object or null: its fields, when it has them.
  const objects = (schema.anyOf ?? []).filter((branch) => branch.properties || branch.allOf);
  return objects.length === 1 ? objectOf(objects[0]!) : null;
}

/** One row per field of a response, nested objects and arrays of objects as `parent.field` and `list[].field`. */
function responseRows(schema: Schema, prefix: string, variants: Variants): string[] {
  const object = objectOf(schema);
  if (!object) return [];
  return Object.entries(object.properties ?? {}).flatMap(([name, field]) => {
    const path = `${prefix}${name}`;
    const always = object.required?.includes(name) ? 'yes' : 'no';
    const nested =
      field.type === 'array' && field.items
        ? responseRows(field.items, `${path}[].`, variants)
        : responseRows(field, `${path}.`, variants);
    const forms = (field.anyOf ?? []).filter((branch) => branch.properties || branch.allOf);
    if (forms.length > 1) variants.set(name, forms);
    const type =
      forms.length > 1
        ? `object (one of ${forms.length} [forms](#forms-of-${name}))`
        : nested.length > 0 && field.type === 'array'
          ? 'object[]'
          : typeOf(field).replace(/^any\b/, 'object');
    return [`| \`${path}\` | ${type} | ${always} | ${cell(field.description ?? '')} |`, ...nested];
  });
}

/** The body of a successful response: its fields, or its type when it is not an object. */
function responseShape(status: string, media: string, schema: Schema, variants: Variants): string[] {
  const title = `Response \`${status}\`${media === 'application/json' ? '' : ` (${media})`}:`;
  const rows = responseRows(schema, '', variants);
  if (rows.length === 0) return [`${title} ${typeOf(schema)}`, ''];
  return [title, '', '| Field | Type | Always | Notes |', '|---|---|---|---|', ...rows, ''];
}

/** Who may call an operation, as its security says. */
function access(route: string, op: Operation): string {
  if (op.security?.length === 0) return 'no token';
  if (route.startsWith('/v1/admin/')) return 'admin token';
  return route.startsWith('/v1/user/') ? 'user token' : 'bearer token';
}

/** The one value a field may take (`const`, or an enum of one), if it has one. */
const constantOf = (field: Schema | undefined): unknown =>
  field?.const ?? (field?.enum?.length === 1 ? field.enum[0] : undefined);

/** Each form of a field with several, as a field table headed by the constant that tells it apart. */
function variantSections(variants: Variants): string[] {
  return [...variants].flatMap(([name, forms]) => {
    const key = Object.keys(forms[0]?.properties ?? {}).find((field) =>
      forms.every((form) => constantOf(form.properties?.[field]) !== undefined),
    );
    return [
      `## Forms of \`${name}\``,
      '',
      key ? `One of these objects, told apart by \`${key}\`.` : 'One of these objects.',
      '',
      ...forms.flatMap((form, i) => {
        const heading = key
          ? `\`${key}\`: ${JSON.stringify(constantOf(form.properties?.[key]))}`
          : `Form ${i + 1}`;
        return [`### ${heading}`, '', fieldTable(objectOf(form) ?? form)];
      }),
    ];
  });
}

export function renderMarkdown(doc: Document): string {
  const lines: string[] = [
    '# API reference',
    '',
    `Generated from the route schemas of ${doc.info.title} ${doc.info.version} by \`npm run docs:api\`; do not edit.`,
    'The machine-readable document is [`api/openapi.json`](api/openapi.json), also served at `GET /v1/openapi.json`.',
    '',
    'Conventions: JSON bodies; errors are `{"error": "...", "code": "snake_case", "details"?: [{field, message}]}`;',
    'timestamps are RFC 3339 UTC; `/v1/admin/*` needs an admin token and `/v1/user/*` a user token',
    '(`Authorization: Bearer <token>`); routes marked "no token" need none. Each route names its `operationId`,',
    'the method name a client generated from the document gives it.',
    '',
  ];
  const variants: Variants = new Map();
  const byTag = new Map<string, string[]>((doc.tags ?? []).map((tag) => [tag.name, []]));
  for (const [route, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const tag = op.tags?.[0] ?? 'other';
      const about = [`\`${op.operationId}\``, access(route, op), ...(op.deprecated ? ['deprecated'] : [])];
      const section: string[] = [
        `### ${method.toUpperCase()} \`${route}\``,
        '',
        op.summary ?? '',
        '',
        about.join(' · '),
        '',
      ];
      const params = op.parameters ?? [];
      if (params.length > 0) {
        section.push('| Parameter | In | Type | Required | Rules |', '|---|---|---|---|---|');
        for (const p of params) {
          const schema = p.schema ?? {};
          section.push(
            `| \`${p.name}\` | ${p.in} | ${typeOf(schema)} | ${p.required ? 'yes' : 'no'} | ${rules(schema)} |`,
          );
        }
        section.push('');
      }
      const body = op.requestBody?.content['application/json']?.schema;
      if (body) section.push('Request body:', '', fieldTable(body));
      const statuses = Object.keys(op.responses ?? {});
      section.push(`Responses: ${statuses.map((s) => `\`${s}\``).join(', ')}`, '');
      for (const status of statuses.filter((s) => s.startsWith('2'))) {
        const content = op.responses?.[status]?.content ?? {};
        const [media, shape] = Object.entries(content)[0] ?? [];
        if (media && shape) section.push(...responseShape(status, media, shape.schema, variants));
      }
      byTag.set(tag, [...(byTag.get(tag) ?? []), ...section]);
    }
  }
  const descriptions = new Map((doc.tags ?? []).map((tag) => [tag.name, tag.description ?? '']));
  for (const [tag, section] of byTag)
    lines.push(`## ${tag}`, '', descriptions.get(tag) ?? '', '', ...section);
  lines.push(...variantSections(variants));
  return `${lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()}\n`;
}

export async function generateOpenApi(): Promise<Document> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-docs-'));
  const config = loadConfig({
    ADMIN_JWT_SECRET: 'x'.repeat(48),
    ADMIN_PASSWORD: 'docs-generation-only',
    DATA_DIR: dataDir,
    DATABASE_URL: 'sqlite::memory:',
    LOG_LEVEL: 'silent',
  });
  const gateway = await createGateway(config, { logger: pino({ level: 'silent' }), httpLogger: false });
  try {
    await gateway.http.ready();
    return gateway.http.swagger() as unknown as Document;
  } finally {
    await gateway.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const root = path.resolve(import.meta.dirname, '..');
  const doc = await generateOpenApi();
  const files = {
    [path.join(root, 'docs/api/openapi.json')]: `${JSON.stringify(doc, null, 2)}\n`,
    [path.join(root, 'docs/api-reference.md')]: renderMarkdown(doc),
  };
  if (process.argv.includes('--check')) {
    const stale = Object.entries(files).filter(([file, text]) => {
      try {
        return readFileSync(file, 'utf8') !== text;
      } catch {
        return true;
      }
    });
    if (stale.length > 0) {
      process.stderr.write(
        `API docs are out of date (${stale.map(([f]) => path.relative(root, f)).join(', ')}); run npm run docs:api\n`,
      );
      process.exit(1);
    }
    return;
  }
  for (const [file, text] of Object.entries(files)) writeFileSync(file, text);
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) await main();
