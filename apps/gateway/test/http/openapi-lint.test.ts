/**
 * The served API document passes Redocly's lint (the rules in redocly.yaml) with no error, so generated clients
 * and documentation tools read it as it is meant. Redocly runs offline: no usage data, no update check, and
 * anything that would still try the network goes to a closed loopback port.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
const redocly = path.join(root, 'node_modules/.bin/redocly');

interface LintReport {
  totals: { errors: number; warnings: number };
  problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
}

async function lint(file: string): Promise<LintReport> {
  const args = ['lint', file, '--config', path.join(root, 'redocly.yaml'), '--format=json'];
  // Exit 1 when there are errors: the report on stdout says which.
  const { stdout } = await promisify(execFile)(redocly, args, {
    env: { ...OFFLINE_TOOL_ENV, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    timeout: 120_000,
    maxBuffer: 16 * 1024 * 1024,
  }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
  return JSON.parse(stdout) as LintReport;
}

const described = (report: LintReport, severity: string) =>
  report.problems
    .filter((problem) => problem.severity === severity)
    .map((problem) => `${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`);

describe('OpenAPI lint (Redocly)', () => {
  let t: TestGateway;
  let dir: string;
  before(async () => {
    t = await startTestGateway('sqlite');
    dir = mkdtempSync(path.join(tmpdir(), 'ccp-openapi-lint-'));
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds no error in the served document', async () => {
    const report = await lint(await writeServedOpenApi(t, dir));
    assert.deepEqual(described(report, 'error'), [], 'Redocly errors in GET /v1/openapi.json');
    const warnings = described(report, 'warn');
    console.log(`redocly lint: 0 errors, ${report.totals.warnings} warnings\n  ${warnings.join('\n  ')}`);
  });
});
