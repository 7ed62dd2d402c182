/**
 * A client generated from the served API document works: openapi-typescript turns the document into types, a
 * small client using them for createHost type-checks with tsc and creates a host on the gateway, and a client
 * that sends a wrong field or reads one that does not exist does not type-check.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import {
  OFFLINE_TOOL_ENV,
  startTestGateway,
  type TestGateway,
  writeServedOpenApi,
} from '../helpers/test-gateway.js';

const root = path.resolve(import.meta.dirname, '../../../..');
const bin = (name: string) => path.join(root, 'node_modules/.bin', name);
const run = promisify(execFile);

/** A client of createHost written against the generated types, as a user of the document would. */
const CLIENT = `import type { operations } from './api.js';

type CreateHost = operations['createHost'];
export type CreateHostBody = CreateHost['requestBody']['content']['application/json'];
export type CreatedHost = CreateHost['responses'][201]['content']['application/json'];

export async function createHost(api: string, token: string, body: CreateHostBody): Promise<CreatedHost> {
  const response = await fetch(\`\${api}/v1/admin/hosts\`, {
    method: 'POST',
    headers: { authorization: \`Bearer \${token}\`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (response.status !== 201) throw new Error(\`createHost: \${response.status}\`);
  return (await response.json()) as CreatedHost;
}
`;

const GOOD_CALL = `import { createHost } from './client.js';

const [api, token, userId] = process.argv.slice(2) as [string, string, string];
const host = await createHost(api, token, { user_id: userId });
const login: string = \`\${host.ssh_user} \${host.ssh.ssh_pass} \${host.status}\`;
console.log(JSON.stringify({ id: host.id, login }));
`;

const WRONG_CALL = `import { createHost } from './client.js';

const host = await createHost('http://gateway', 'token', { owner: 'alice' });
const name: string = host.hostname;
`;

async function typeCheck(dir: string, file: string): Promise<{ ok: boolean; output: string }> {
  writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        lib: ['es2022'],
        // Node's own types (fetch, process) from the repository; the temporary folder has no node_modules.
        typeRoots: [path.join(root, 'node_modules/@types')],
        types: ['node'],
      },
      files: [file],
    }),
  );
  try {
    await run(bin('tsc'), ['-p', path.join(dir, 'tsconfig.json')], { cwd: dir, timeout: 120_000 });
    return { ok: true, output: '' };
  } catch (error) {
    return { ok: false, output: String((error as { stdout?: string }).stdout ?? error) };
  }
}

describe('OpenAPI typed client (openapi-typescript)', () => {
  let t: TestGateway;
  let dir: string;
  before(async () => {
    t = await startTestGateway('sqlite');
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-openapi-client-'));
    // A module folder, so that tsc and tsx read the .ts files as ES modules.
    writeFileSync(path.join(dir, 'package.json'), '{"type": "module"}');
    const document = await writeServedOpenApi(t, dir);
    await run(bin('openapi-typescript'), [document, '--output', path.join(dir, 'api.d.ts')], {
      env: OFFLINE_TOOL_ENV,
      timeout: 120_000,
    });
    writeFileSync(path.join(dir, 'client.ts'), CLIENT);
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('type-checks a createHost call and creates the host with it', async () => {
    writeFileSync(path.join(dir, 'create-host.ts'), GOOD_CALL);
    const checked = await typeCheck(dir, 'create-host.ts');
    assert.ok(checked.ok, checked.output);

    const user = await t.createUser('typed-client');
    const api = await t.listen();
    const { stdout } = await run(bin('tsx'), ['create-host.ts', api, t.adminToken, user.id], {
      cwd: dir,
      timeout: 60_000,
    });
    const created = JSON.parse(stdout) as { id: string; login: string };
    assert.match(created.login, /^typed-client\+[a-z2-9]{8} \S+ created$/);
    const listed = await t.request('GET', `/v1/admin/hosts/${created.id}`);
    assert.equal(listed.body.user_id, user.id);
  });

  it('rejects a call with a field the API does not have', async () => {
    writeFileSync(path.join(dir, 'wrong-call.ts'), WRONG_CALL);
    const checked = await typeCheck(dir, 'wrong-call.ts');
    assert.equal(checked.ok, false, 'a wrong createHost call type-checked');
    // The unknown request field, and the response field that does not exist.
    assert.match(checked.output, /wrong-call\.ts\(3,\d+\): error TS2353: .*'owner'/);
    assert.match(checked.output, /wrong-call\.ts\(4,\d+\): error TS2339: .*'hostname'/);
  });
});
