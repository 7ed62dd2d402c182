/**
 * The import rules of docs/architecture.md, enforced by Biome's noRestrictedImports (biome.json). Each rule has a
 * fixture: a one-line module that breaks it, written into a copy of the repository's layout in a temporary
 * directory beside a copy of biome.json, so that nothing is ever written into the sources. One Biome run lints
 * them all; each must fail with its rule's message, and the allowed imports must pass.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LAYERS } from './layers.js';

const root = path.resolve(import.meta.dirname, '../../../..');
const biome = path.join(root, 'node_modules/.bin/biome');
const gateway = 'apps/gateway/src';

/** A folder, an import that breaks a rule there, and the rule's message. */
const forbidden: [string, string, RegExp][] = [
  [
    `${gateway}/http/routes`,
    "import { UsersRepository as imported } from '../../store/users-repository.js';",
    /HTTP never touches SQL/,
  ],
  [
    `${gateway}/http/plugins`,
    "import { UsersRepository as imported } from '../../store/users-repository.js';",
    /HTTP never touches SQL/,
  ],
  [`${gateway}/http`, "import { loadConfig as imported } from '../config.js';", /http\/ sits below/],
  [
    `${gateway}/ssh`,
    "import type { UserRow as imported } from '../store/users-repository.js';",
    /SSH proxy admits through the domain/,
  ],
  [
    `${gateway}/ssh`,
    "import type { UserRow as imported } from '../domain/access/access.js';",
    /ssh\/ takes the domain's shapes/,
  ],
  [`${gateway}/ssh`, "import { VncProxy as imported } from '../vnc/vnc-proxy.js';", /ssh\/ sits below/],
  [
    `${gateway}/vnc`,
    "import type { HostWithOwner as imported } from '../store/hosts-repository.js';",
    /desktop admits through the domain/,
  ],
  [
    `${gateway}/vnc`,
    "import type { HostWithOwner as imported } from '../domain/access/grants.js';",
    /vnc\/ takes the domain's shapes/,
  ],
  [`${gateway}/vnc`, "import { SshProxy as imported } from '../ssh/ssh-proxy.js';", /vnc\/ sits below/],
  [
    `${gateway}/cluster`,
    "import { SshProxy as imported } from '../ssh/ssh-proxy.js';",
    /cluster\/ sits below/,
  ],
  [`${gateway}/domain`, "import { buildApp as imported } from '../http/app.js';", /rules know no HTTP/],
  [`${gateway}/domain`, "import imported from 'fastify';", /rules know no HTTP/],
  [
    `${gateway}/domain`,
    "import { vncBasePath as imported } from '../vnc/vnc-access.js';",
    /build no desktop URLs/,
  ],
  [
    `${gateway}/domain`,
    "import { NodeChannel as imported } from '../cluster/node-channel.js';",
    /domain\/ sits below/,
  ],
  [
    `${gateway}/events`,
    "import { AccessRevocation as imported } from '../domain/access-revocation.js';",
    /bus knows no business rules/,
  ],
  [
    `${gateway}/events`,
    "import type { RuntimeNotice as imported } from '../runtime/workspace-runtime.js';",
    /bus knows no container engine/,
  ],
  [`${gateway}/events`, "import { SshProxy as imported } from '../ssh/ssh-proxy.js';", /events\/ sits below/],
  [`${gateway}/runtime`, "import { buildApp as imported } from '../http/app.js';", /driver knows no HTTP/],
  [
    `${gateway}/runtime`,
    "import { vncAuthResponse as imported } from '../vnc/vnc-auth.js';",
    /driver knows no desktop protocol/,
  ],
  [
    `${gateway}/runtime`,
    "import { DomainError as imported } from '../domain/errors.js';",
    /driver knows no business rules/,
  ],
  [
    `${gateway}/runtime`,
    "import { EventBus as imported } from '../events/event-bus.js';",
    /runtime\/ sits below/,
  ],
  [
    `${gateway}/runtime`,
    "import type { EgressSettings as imported } from '../config.js';",
    /runtime\/ sits below .*composition root/,
  ],
  [`${gateway}/egress`, "import { buildApp as imported } from '../http/app.js';", /Egress knows no HTTP/],
  [
    `${gateway}/egress`,
    "import type { EgressIpsService as imported } from '../domain/egress-ips-service.js';",
    /Egress knows no business rules/,
  ],
  [
    `${gateway}/egress`,
    "import { DockerWorkspaceRuntime as imported } from '../runtime/docker-workspace-runtime.js';",
    /egress\/ sits below/,
  ],
  [
    `${gateway}/store`,
    "import { UsersService as imported } from '../domain/users-service.js';",
    /Repositories call no business rules/,
  ],
  [`${gateway}/store`, "import { buildApp as imported } from '../http/app.js';", /store knows no HTTP/],
  [
    `${gateway}/store`,
    "import { HostDialer as imported } from '../cluster/host-dialer.js';",
    /store knows no other gateways/,
  ],
  [
    `${gateway}/store`,
    "import { DockerWorkspaceRuntime as imported } from '../runtime/docker-workspace-runtime.js';",
    /store\/ sits below/,
  ],
  [
    `${gateway}/shared`,
    "import { UsersRepository as imported } from '../store/users-repository.js';",
    /leaf every part may import/,
  ],
  [
    `${gateway}/ops`,
    "import { openDatabase as imported } from '../store/database.js';",
    /beside the gateway/,
  ],
  [
    'packages/api/src',
    "import { DomainError as imported } from '../../../apps/gateway/src/domain/errors.js';",
    /carries no app's code/,
  ],
  [
    'apps/cli/src',
    "import { UsersService as imported } from '../../gateway/src/domain/users-service.js';",
    /apps\/cli imports no other app/,
  ],
  [
    'apps/dashboard/src',
    "import { HostsService as imported } from '../../gateway/src/domain/hosts-service.js';",
    /apps\/dashboard imports no other app/,
  ],
  [
    'apps/egress-probe/src',
    "import { buildApp as imported } from '../../gateway/src/http/app.js';",
    /apps\/egress-probe imports no other app/,
  ],
];

/** Imports down the layers, which the rules must let through. */
const allowed: [string, string][] = [
  [`${gateway}/http/routes`, "import { UsersService as imported } from '../../domain/users-service.js';"],
  [`${gateway}/http/routes`, "import { vncPagePath as imported } from '../../vnc/vnc-access.js';"],
  [`${gateway}/ssh`, "import { Access as imported } from '../domain/access.js';"],
  [`${gateway}/vnc`, "import { HostDialer as imported } from '../cluster/host-dialer.js';"],
  [`${gateway}/vnc`, "import type { HostAccess as imported } from '../domain/access/host-access.js';"],
  [`${gateway}/cluster`, "import { SecretBox as imported } from '../domain/secret-box.js';"],
  [`${gateway}/domain`, "import { UsersRepository as imported } from '../store/users-repository.js';"],
  [`${gateway}/domain`, "import { EventBus as imported } from '../events/event-bus.js';"],
  [`${gateway}/events`, "import { EventsRepository as imported } from '../store/events-repository.js';"],
  [`${gateway}/runtime`, "import type { EgressSettings as imported } from '../egress/settings.js';"],
  [`${gateway}/runtime`, "import { DomainError as imported } from '../shared/errors.js';"],
  [`${gateway}/store`, "import { nowIso as imported } from '../shared/clock.js';"],
  [`${gateway}/shared`, "import { createCipheriv as imported } from 'node:crypto';"],
  ['apps/cli/src', "import { Schemas as imported } from '@ccp/api';"],
];

interface Override {
  includes: string[];
  linter?: { rules?: { style?: { noRestrictedImports?: { options: { patterns: Pattern[] } } } } };
}
interface Pattern {
  group: string[];
  message: string;
}

/** Every folder with import rules, and its rules, from biome.json. */
function importRules(): { folder: string; patterns: Pattern[] }[] {
  const config = JSON.parse(readFileSync(path.join(root, 'biome.json'), 'utf8')) as { overrides: Override[] };
  return config.overrides.flatMap((override) => {
    const rule = override.linter?.rules?.style?.noRestrictedImports;
    return rule
      ? [{ folder: override.includes[0]!.replace(/\/\*\*$/, ''), patterns: rule.options.patterns }]
      : [];
  });
}

describe('import rules', () => {
  let dir: string;
  const diagnostics = new Map<string, string[]>();
  const fixtureFile = (kind: string, index: number, folder: string) =>
    path.join(folder, `zz-${kind}-${index}.ts`);

  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-import-rules-'));
    copyFileSync(path.join(root, 'biome.json'), path.join(dir, 'biome.json'));
    const write = (file: string, source: string) => {
      mkdirSync(path.join(dir, path.dirname(file)), { recursive: true });
      writeFileSync(path.join(dir, file), `${source}\n\nexport const used = imported;\n`);
    };
    for (const [index, [folder, source]] of forbidden.entries())
      write(fixtureFile('forbidden', index, folder), source);
    for (const [index, [folder, source]] of allowed.entries())
      write(fixtureFile('allowed', index, folder), source);
    const run = spawnSync(biome, ['lint', '--reporter=github', '--max-diagnostics=none', '.'], {
      cwd: dir,
      encoding: 'utf8',
    });
    for (const line of run.stdout.split('\n')) {
      const found = /^::error title=lint\/style\/noRestrictedImports,file=([^,]+),.*::(.*)$/.exec(line);
      if (!found) continue;
      const file = path.relative(dir, found[1]!);
      diagnostics.set(file, [...(diagnostics.get(file) ?? []), found[2]!]);
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  forbidden.forEach(([folder, source, message], index) => {
    it(`refuses in ${folder}: ${source}`, () => {
      const found = diagnostics.get(fixtureFile('forbidden', index, folder)) ?? [];
      assert.equal(
        found.length,
        1,
        `expected one noRestrictedImports diagnostic, got ${JSON.stringify(found)}`,
      );
      assert.match(found[0]!, message);
    });
  });

  it('lets each part import the parts below it', () => {
    const refused = allowed.flatMap(([folder, source], index) =>
      (diagnostics.get(fixtureFile('allowed', index, folder)) ?? []).map(
        (text) => `${folder}: ${source}: ${text}`,
      ),
    );
    assert.deepEqual(refused, []);
  });

  it('has a fixture for every rule in biome.json', () => {
    const untested = importRules().flatMap(({ folder, patterns }) =>
      patterns
        .filter(
          ({ message }) =>
            !forbidden.some(
              ([at, , expected]) => (at === folder || at.startsWith(`${folder}/`)) && expected.test(message),
            ),
        )
        .map(({ message }) => `${folder}: ${message}`),
    );
    assert.deepEqual(untested, []);
  });

  it('forbids each gateway folder every part beside and above it (layers.ts)', () => {
    const missing: string[] = [];
    for (const { folder, patterns } of importRules().filter(({ folder }) =>
      folder.startsWith(`${gateway}/`),
    )) {
      const part = folder.slice(gateway.length + 1);
      const groups = patterns.flatMap(({ group }) => group);
      for (const [other, rank] of Object.entries(LAYERS)) {
        if (other === part || rank > LAYERS[part]!) continue;
        const pattern = other === 'root' ? '**/config.js' : `**/${other}/**`;
        if (!groups.includes(pattern)) missing.push(`${part} may import ${other}`);
      }
    }
    assert.deepEqual(missing, []);
  });
});
