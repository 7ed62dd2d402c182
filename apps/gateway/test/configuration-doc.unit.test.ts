/**
 * docs/configuration.md lists every variable as the parts' settings schemas declare it: the committed tables must
 * be what `npm run docs:config` writes now, and no secret's value is ever in them.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { SETTINGS } from '../src/config.js';
import { settingsTables, withSettingsTables } from '../src/configuration-doc.js';

const root = path.resolve(import.meta.dirname, '../../..');
const docFile = path.join(root, 'docs/configuration.md');

describe('docs/configuration.md', () => {
  it('has the settings tables the schemas write (npm run docs:config)', () => {
    const committed = readFileSync(docFile, 'utf8');
    assert.equal(
      committed,
      withSettingsTables(committed),
      'docs/configuration.md differs from the settings schemas: run npm run docs:config and commit it',
    );
  });

  it('lists each variable once, under the part that reads it', () => {
    const names = SETTINGS.flatMap(({ variables }) => Object.keys(variables.properties));
    assert.deepEqual(
      names.filter((name, index) => names.indexOf(name) !== index),
      [],
    );
    const tables = settingsTables();
    for (const name of names) assert.match(tables, new RegExp(`^\\| \`${name}\` `, 'm'));
    for (const { source, variables } of SETTINGS) {
      assert.ok(existsSync(path.join(root, source)), `${source} (named by SETTINGS) exists`);
      const declared = readFileSync(path.join(root, source), 'utf8');
      for (const name of Object.keys(variables.properties))
        assert.ok(declared.includes(`${name}:`), `${name} is declared in ${source}`);
    }
  });

  it('shows no value of a secret', () => {
    const secrets = SETTINGS.flatMap(({ variables }) =>
      Object.entries(variables.properties).filter(([, schema]) => (schema as { secret?: boolean }).secret),
    );
    assert.deepEqual(secrets.map(([name]) => name).sort(), [
      'ADMIN_JWT_SECRET',
      'ADMIN_PASSWORD',
      'EGRESS_PROBE_TOKEN',
    ]);
    for (const [name] of secrets) {
      const row = settingsTables()
        .split('\n')
        .find((line) => line.startsWith(`| \`${name}\` `))!;
      const defaultCell = row.split('|')[3]!.trim();
      assert.match(defaultCell, /^\((none|required)\)$/, `${name}'s default cell: ${defaultCell}`);
    }
  });
});
