/**
 * The layering of architecture.md, enforced by Biome's noRestrictedImports (biome.json): each case writes a
 * one-line module into the folder it stands for, lints it, and removes it again.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';

const root = path.resolve(import.meta.dirname, '../../../..');
const biome = path.join(root, 'node_modules/.bin/biome');

function lint(folder: string, source: string): { ok: boolean; output: string } {
  const file = path.join(root, folder, `zz-import-rule-${randomBytes(4).toString('hex')}.ts`);
  writeFileSync(file, `${source}\n\nexport const used = imported;\n`);
  try {
    const run = spawnSync(biome, ['lint', '--max-diagnostics=5', file], { cwd: root, encoding: 'utf8' });
    return { ok: run.status === 0, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(file, { force: true });
  }
}

describe('import rules', () => {
  const forbidden: [string, string, RegExp][] = [
    [
      'apps/gateway/src/http/routes',
      "import { UsersRepository as imported } from '../../store/users-repository.js';",
      /never the store/,
    ],
    ['apps/gateway/src/domain', "import { buildApp as imported } from '../http/app.js';", /free of HTTP/],
    ['apps/gateway/src/domain', "import imported from 'fastify';", /free of HTTP/],
    [
      'apps/gateway/src/store',
      "import { UsersService as imported } from '../domain/users-service.js';",
      /nothing above it/,
    ],
    [
      'apps/gateway/src/store',
      "import { DockerWorkspaceRuntime as imported } from '../runtime/docker-workspace-runtime.js';",
      /nothing above it/,
    ],
  ];
  for (const [folder, source, message] of forbidden) {
    it(`refuses in ${folder}: ${source}`, () => {
      const result = lint(folder, source);
      assert.equal(result.ok, false, result.output);
      assert.match(result.output, /noRestrictedImports/);
      assert.match(result.output, message);
    });
  }

  it('lets each layer use the one below it', () => {
    for (const [folder, source] of [
      [
        'apps/gateway/src/http/routes',
        "import { UsersService as imported } from '../../domain/users-service.js';",
      ],
      [
        'apps/gateway/src/domain',
        "import { UsersRepository as imported } from '../store/users-repository.js';",
      ],
    ] as const) {
      const result = lint(folder, source);
      assert.equal(result.ok, true, result.output);
    }
  });
});
