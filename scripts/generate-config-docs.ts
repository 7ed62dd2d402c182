/** Writes the settings tables of docs/configuration.md from each part's settings.ts (the prose stays as it is).
 * `--check` exits non-zero when the committed file differs from what the schemas write. */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { withSettingsTables } from '../apps/gateway/src/configuration-doc.js';

const file = path.resolve(import.meta.dirname, '../docs/configuration.md');
const committed = readFileSync(file, 'utf8');
const generated = withSettingsTables(committed);
if (process.argv.includes('--check')) {
  if (generated !== committed) {
    console.error('docs/configuration.md differs from the settings schemas: run npm run docs:config');
    process.exit(1);
  }
} else if (generated !== committed) {
  writeFileSync(file, generated);
  console.log('wrote docs/configuration.md');
}
