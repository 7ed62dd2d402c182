/**
 * Every HTTP call the docs show names a route the gateway serves: `METHOD /path` in prose and code, `curl` lines
 * (their method from -X, -d, -I), and bare `/v1/...` paths in inline code. Checked against the running app's
 * route table, so a renamed or invented route in a doc fails here.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  type RegisteredRoute,
  registeredRoutes,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';

const root = path.resolve(import.meta.dirname, '../../../..');

/** The README and every page under docs/. */
function markdownFiles(): string[] {
  const docs = readdirSync(path.join(root, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.md'))
    .map((file) => path.join('docs', file));
  return ['README.md', ...docs.sort()];
}

interface Example {
  /** Where it is: `docs/troubleshooting.md:79`. */
  where: string;
  /** As written, for the failure message. */
  text: string;
  /** Null for a bare path: any method will do. */
  method: string | null;
  path: string;
}

const METHOD = 'GET|HEAD|POST|PUT|PATCH|DELETE';
// A path as docs write it; placeholders may hold spaces (`{your id}`, `<short id>`).
const PATH = String.raw`/(?:\{[^}\n]*\}|<[^>\n]*>|[^\s\x60'"()|<>{}\\])*`;
// The gateway's address in a curl line: a URL's host, a shell variable, an elision or a placeholder.
const HOST = String.raw`(?:https?://)?(?:<[^>\n]*>|\$\{?\w+\}?|[\w.-]+|…)(?::\d+)?`;

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/** Query string and trailing punctuation of the sentence removed. */
function cleanPath(raw: string): string {
  return raw.replace(/[?#].*$/s, '').replace(/[.,:;]+$/, '');
}

/** The method a curl command sends. */
function curlMethod(command: string): string {
  const explicit = /(?:\s-X\s*|\s--request\s+)([A-Z]+)/.exec(command);
  if (explicit) return explicit[1]!;
  if (/\s(?:-d|--data(?:-\w+)?|--json|-F|--form)[\s=]/.test(command)) return 'POST';
  if (/\s(?:-[A-Za-z]*I|--head)\s/.test(` ${command} `)) return 'HEAD';
  return 'GET';
}

function examplesIn(file: string): Example[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  const examples: Example[] = [];
  const add = (index: number, shown: string, method: string | null, rawPath: string) =>
    examples.push({
      where: `${file}:${lineOf(text, index)}`,
      text: shown.replace(/\s+/g, ' ').trim(),
      method,
      path: cleanPath(rawPath),
    });

  // `POST /v1/admin/bindings`, also across a line break and with the path in backticks.
  for (const match of text.matchAll(new RegExp(String.raw`\b(${METHOD})\s+\x60?(${PATH})`, 'g')))
    add(match.index, match[0], match[1]!, match[2]!);

  // curl commands: from `curl` to the end of the (continued) line, an inline code span's end or the next curl.
  const joined = text.replace(/\\\n/g, '  ');
  for (const match of joined.matchAll(/\bcurl\s[^\n\x60]*/g)) {
    for (const command of match[0].split(/(?=\bcurl\s)/)) {
      const url = new RegExp(`${HOST}(${PATH})`, 'g');
      const paths = [...command.matchAll(url)].map((found) => found[1]!);
      // Header values (`application/json`) and other hosts' paths are left to the filter below.
      for (const found of paths) add(match.index, command, curlMethod(command), found);
    }
  }

  // Bare paths in inline code: `/v1/cli/ccp.mjs`, `/healthz`.
  // Code blocks blanked out (their lines kept, so positions stay those of the file).
  const prose = text.replace(/^```[^\n]*\n[\s\S]*?^```/gm, (block) => block.replace(/[^\n]/g, ' '));
  for (const match of prose.matchAll(/\x60([^\x60]+)\x60/g)) {
    const span = match[1]!.trim();
    if (new RegExp(`^${PATH}$`).test(span)) add(match.index, match[0], null, span);
  }
  return examples;
}

/** `{admin,user}` in a path stands for each of its words. */
function expand(docPath: string): string[] {
  const alternatives = /\{([\w-]+(?:,[\w-]+)+)\}/.exec(docPath);
  if (!alternatives) return [docPath];
  return alternatives[1]!.split(',').flatMap((word) => expand(docPath.replace(alternatives[0], word)));
}

/** `{id}`, `<id>`, `$HOST_ID`, `:hostID` and `…` stand for any segment; `*` and `…` at the end for any rest. */
const isPlaceholder = (segment: string) => /[{}<>$…]|^:/.test(segment);

/** Whether a doc's path is one the route serves; with `prefix`, whether it begins one of its paths. */
function matches(docPath: string, route: string, prefix: boolean): boolean {
  const doc = docPath.split('/').slice(1);
  if (prefix && doc.at(-1) === '') doc.pop();
  const pattern = route.split('/').slice(1);
  for (const [i, segment] of doc.entries()) {
    const wanted = pattern[i];
    if (wanted === undefined) return false;
    if (wanted === '*') return true;
    // `/v1/admin/*`, `/v1/admin/…`: anything below.
    if ((segment === '*' || segment.endsWith('…')) && i === doc.length - 1) return true;
    if (wanted.startsWith(':') || isPlaceholder(segment) || segment === wanted) continue;
    return false;
  }
  return prefix || doc.length === pattern.length;
}

describe('HTTP examples in the docs', () => {
  let t: TestGateway;
  let routes: RegisteredRoute[];
  before(async () => {
    t = await startTestGateway('sqlite');
    // The dashboard's page fallback (`GET /*`, when built) would match any GET: it is no API route.
    routes = registeredRoutes(t.gateway.http).filter((route) => route.url !== '/*');
  });
  after(() => t.close());

  it('name only routes the gateway serves', () => {
    // Paths under the gateway's own first segments (/v1, /entry, /healthz, ...): others are the lab's or a
    // workspace's (`curl http://www.public.test/ip`), or a header value.
    const served = new Set(routes.map((route) => route.url.split('/')[1]));
    const examples = markdownFiles()
      .flatMap(examplesIn)
      .filter((example) => served.has(example.path.split('/')[1]!));
    assert.ok(examples.length > 60, `only ${examples.length} examples found: is the extraction broken?`);

    const wrong = examples.flatMap((example) => {
      const candidates = expand(example.path);
      const unserved = candidates.filter(
        (candidate) =>
          !routes.some(
            (route) =>
              (example.method === null || route.method === example.method) &&
              matches(candidate, route.url, example.method === null),
          ),
      );
      if (unserved.length === 0) return [];
      const others = routes
        .filter((route) => unserved.some((candidate) => matches(candidate, route.url, false)))
        .map((route) => route.method);
      const hint = others.length > 0 ? ` (that path takes ${[...new Set(others)].join(', ')})` : '';
      return [
        `${example.where}: ${example.method ?? 'any method'} ${unserved.join(', ')}${hint}  in: ${example.text}`,
      ];
    });
    assert.deepEqual(wrong, [], `docs name routes the gateway does not serve:\n${wrong.join('\n')}`);
  });

  it('reads the forms the docs use', () => {
    const served = (method: string, docPath: string) =>
      routes.some((route) => route.method === method && matches(docPath, route.url, false));
    // The extraction itself, on lines as the docs write them.
    assert.ok(served('POST', '/v1/admin/bindings'));
    assert.ok(!served('POST', '/v1/admin/hosts/{id}/bindings'));
    assert.ok(served('POST', '/v1/admin/users/{your id}/rotate-password'));
    assert.ok(!served('GET', '/v1/admin/no-such-thing/…'));
    assert.ok(expand('/v1/{admin,user}/hosts/{id}/vnc/ticket').every((p) => served('POST', p)));
    assert.equal(curlMethod('curl -fsS "$API/v1/admin/users" -H "$AUTH" -d \'{}\''), 'POST');
    assert.equal(curlMethod('curl -fsS -X DELETE "$GATEWAY/v1/admin/nodes/node-2"'), 'DELETE');
    assert.equal(curlMethod('curl -fsSL http://<gateway>/entry/<short id> | sh'), 'GET');
    assert.equal(curlMethod('curl -sI "$API/healthz"'), 'HEAD');
    assert.equal(cleanPath('/v1/admin/events?host_id=…'), '/v1/admin/events');
  });
});
