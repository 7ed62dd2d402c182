/**
 * The access command and the bootstrap line send a password to PUBLIC_API_URL: over plain HTTP on a network,
 * the real scripts, under sh in a terminal, say so on stderr before they ask for it (so before anything is sent),
 * in the words the portal shows beside the access command. On the loopback they say nothing.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freeLoopbackPort } from '../../src/egress/loopback-ports.js';
import { GATEWAY_NAME, homeWithCurlrc } from '../helpers/ccp-install.js';
import { PtySession } from '../helpers/pty-session.js';
import { startTestGateway, type TestGateway } from '../helpers/test-gateway.js';

const WARNING = 'cloud-cli-proxy: WARNING: ';

for (const network of ['plain HTTP on a network', 'the loopback'] as const) {
  const plain = network === 'plain HTTP on a network';

  describe(`the entry and bootstrap scripts over ${network}`, { timeout: 120_000 }, () => {
    let dir: string;
    let t: TestGateway;
    let apiUrl: string;
    let home: string;

    before(async () => {
      dir = mkdtempSync(path.join(tmpdir(), 'ccp-access-transport-'));
      const port = await freeLoopbackPort();
      // A public-looking name, which each home's ~/.curlrc leads to the loopback.
      apiUrl = plain ? `http://${GATEWAY_NAME}:${port}` : `http://127.0.0.1:${port}`;
      t = await startTestGateway('sqlite', {
        HTTP_PORT: String(port),
        PUBLIC_HOST: plain ? GATEWAY_NAME : '127.0.0.1',
        PUBLIC_API_URL: apiUrl,
        PUBLIC_ENTRY_URL: apiUrl,
      });
      await t.listen();
      home = homeWithCurlrc(dir, 'user', [`resolve = "${GATEWAY_NAME}:${port}:127.0.0.1"`]);
    });
    after(async () => {
      await t?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    /**
     * Runs `command | sh` in a terminal with its stderr in a file; at the first prompt, what stderr held then.
     * The host has no egress IP: the password, once sent, is answered with exit 8.
     */
    async function run(command: string, prompts: [string, string][]) {
      const stderrFile = path.join(dir, `stderr-${Math.random().toString(36).slice(2)}`);
      const session = new PtySession(`${command} | sh 2>'${stderrFile}'`, {
        PATH: process.env.PATH,
        HOME: home,
      });
      let beforeFirstPrompt: string | null = null;
      for (const [prompt, answer] of prompts) {
        await session.waitFor(prompt);
        beforeFirstPrompt ??= readFileSync(stderrFile, 'utf8');
        session.type(`${answer}\r`);
      }
      const code = await session.exitCode(30_000);
      return { code, beforeFirstPrompt, stderr: readFileSync(stderrFile, 'utf8'), screen: session.screen };
    }

    it(
      plain
        ? 'the access command warns on stderr before it asks for the password, as the portal does'
        : 'the access command asks for the password without a warning',
      async () => {
        const user = await t.createUser('entryuser');
        const host = (await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } })).body;
        assert.equal(host.access_command, `curl -fsSL ${apiUrl}/entry/${host.short_id} | sh`);
        const result = await run(host.access_command.replace(/ \| sh$/, ''), [
          [`Password for host ${host.short_id}: `, user.password],
        ]);
        assert.equal(result.code, 8, `${result.screen}\nstderr: ${result.stderr}`);
        assert.match(result.stderr, /ask an administrator to bind an egress IP/, 'the password was sent');
        if (plain) {
          assert.match(
            host.access_warning,
            new RegExp(
              `^The access command goes over plain HTTP \\(http://${GATEWAY_NAME.replaceAll('.', '\\.')}:\\d+\\): anyone on the network path can read the password it sends`,
            ),
          );
          assert.equal(result.beforeFirstPrompt, `${WARNING}${host.access_warning}\n`);
          assert.ok(result.stderr.startsWith(`${WARNING}${host.access_warning}\n`), result.stderr);
        } else {
          assert.equal(host.access_warning, null);
          assert.equal(result.beforeFirstPrompt, '');
          assert.doesNotMatch(result.stderr, /WARNING/);
        }
      },
    );

    it(
      plain
        ? 'the bootstrap line warns on stderr before it asks for the username'
        : 'the bootstrap line asks for the username without a warning',
      async () => {
        const user = await t.createUser('bootuser');
        await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id } });
        const result = await run(`curl -fsSL ${apiUrl}/v1/bootstrap/script`, [
          ['Username: ', 'bootuser'],
          ['Password for bootuser: ', user.password],
        ]);
        assert.equal(result.code, 8, `${result.screen}\nstderr: ${result.stderr}`);
        if (plain) {
          assert.match(
            result.beforeFirstPrompt ?? '',
            new RegExp(
              `^${WARNING}The bootstrap command goes over plain HTTP \\(http://${GATEWAY_NAME.replaceAll('.', '\\.')}:\\d+\\): anyone on the network path can read the password it sends or replace the script it runs\\..*behind TLS \\(https\\)\\.\n$`,
            ),
          );
        } else {
          assert.equal(result.beforeFirstPrompt, '');
          assert.doesNotMatch(result.stderr, /WARNING/);
        }
      },
    );
  });
}
