import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { type Config, configDir, configPath, loadConfig } from './config.js';
import { entryAuth, WrongPasswordError } from './entry-auth.js';
import { ConfigError, exitCodeOf, StartTimeoutError } from './errors.js';
import { checkGateway, checkHost, hostStateAdvice } from './gateway-checks.js';
import { KnownHosts } from './known-hosts.js';
import { openFolderMount } from './mount.js';
import { openLink } from './session-runner.js';
import { execCollect, shellQuote, targetOf } from './ssh-connection.js';
import { paint, readSecret } from './terminal.js';

const run = promisify(execFile);

/** One line of the report: what was checked, how it went, and what to do when it did not go well. */
interface Finding {
  what: string;
  state: 'ok' | 'warn' | 'fail' | 'skip';
  text: string;
  /** For a failure: the exit code ccp itself would end with for it. */
  code?: number;
}

const LABEL = { ok: 'ok  ', warn: 'warn', fail: 'FAIL', skip: 'skip' } as const;
const COLOUR = { ok: 32, warn: 33, fail: 31, skip: 2 } as const;

/** The oldest git whose options the command policy relies on (docs/cli.md). */
const GIT_MINIMUM = [2, 32] as const;

const failure = (what: string, error: unknown, advice = ''): Finding => ({
  what,
  state: 'fail',
  text: `${(error as Error).message}${advice}`,
  code: exitCodeOf(error),
});

/**
 * Checks what a first run needs, in the order ccp needs it, and says for each what to do. Starts nothing:
 * the workspace checks run only when the host already runs. Resolves with the exit code: 0 when nothing
 * failed (warnings allowed), else the code ccp would end with for the first failure.
 */
export async function runDoctor(): Promise<number> {
  const findings: Finding[] = [];
  const report = (finding: Finding) => {
    findings.push(finding);
    const label = paint(process.stdout, COLOUR[finding.state], LABEL[finding.state]);
    process.stdout.write(`${label}  ${finding.what}: ${finding.text}\n`);
  };

  report(terminalFinding());
  let config: Config | undefined;
  try {
    config = loadConfig();
    report({
      what: 'config',
      state: 'ok',
      text: `${configPath()} (mount_mode ${config.mount_mode}, session_command \`${config.session_command}\`)`,
    });
  } catch (error) {
    report(failure('config', error));
  }
  if (config) await remoteFindings(config, report);
  else report({ what: 'gateway', state: 'skip', text: 'no usable config file; run `ccp init` first' });
  for (const finding of await proxyCommandFindings(config?.proxy_commands ?? ['git'])) report(finding);

  const failed = findings.find((finding) => finding.state === 'fail');
  process.stdout.write(
    failed
      ? '\nccp doctor: fix the FAIL lines above, then run it again\n'
      : '\nccp doctor: ready for `ccp`\n',
  );
  return failed?.code ?? 0;
}

function terminalFinding(): Finding {
  const what = 'terminal';
  if (!process.stdin.isTTY || !process.stdout.isTTY)
    return failure(
      what,
      new ConfigError(
        'standard input or output is not a terminal; run ccp in a terminal window, not through a pipe',
      ),
    );
  const term = process.env.TERM ?? '';
  if (term === '' || term === 'dumb')
    return {
      what,
      state: 'warn',
      text: `TERM is "${term}": tmux in the workspace draws poorly; set TERM=xterm-256color`,
    };
  const size = `${process.stdout.columns}x${process.stdout.rows}`;
  const locale = process.env.LC_ALL || process.env.LC_CTYPE || process.env.LANG || '';
  if (!/utf-?8/i.test(locale))
    return {
      what,
      state: 'warn',
      text: `${term}, ${size}; the locale "${locale}" is not UTF-8, so tmux may show other characters as _ (set LANG=C.UTF-8)`,
    };
  return { what, state: 'ok', text: `${term}, ${size}, ${locale}` };
}

async function remoteFindings(config: Config, report: (finding: Finding) => void): Promise<void> {
  try {
    const health = await checkGateway(config.gateway);
    report({
      what: 'gateway',
      state: health.status === 'ok' ? 'ok' : 'warn',
      text:
        health.status === 'ok'
          ? `${config.gateway} answers as the gateway's API`
          : `${config.gateway} answers, but says it is ${health.status} (its database or container engine); hosts may not start`,
    });
  } catch (error) {
    report(failure('gateway', error, '; fix it with `ccp init --gateway <url>`'));
    return;
  }

  const saved = config.password ?? (process.env.CCP_PASSWORD || undefined);
  const password = saved ?? (await readSecret(`Password for host ${config.short_id}: `)) ?? undefined;
  if (!password) {
    report({
      what: 'host',
      state: 'skip',
      text: 'no password to check (no terminal, no CCP_PASSWORD, none saved); run ccp doctor in a terminal',
    });
    return;
  }
  let status: string;
  try {
    const checked = await checkHost(config.gateway, config.short_id, password);
    status = checked.host_status;
    report({
      what: 'host',
      state: 'ok',
      text: `${config.short_id} (${checked.username}'s): password accepted`,
    });
    const advice = hostStateAdvice(status);
    report(
      advice.ok
        ? { what: 'host state', state: 'ok', text: advice.text }
        : failure('host state', new StartTimeoutError(advice.text)),
    );
  } catch (error) {
    const advice =
      error instanceof WrongPasswordError && config.password !== undefined
        ? '; the saved one is out of date: ccp init --save-password'
        : '';
    report(failure('host', error, advice));
    return;
  }
  if (status !== 'running') {
    report({
      what: 'workspace',
      state: 'skip',
      text: `the host is ${status}: tmux, the session command and the folder mount are checked when it runs (doctor starts nothing)`,
    });
    return;
  }
  await workspaceFindings(config, password, report);
}

/** On a running host: the SSH proxy and its key, tmux, the session command's program, a scratch mount. */
async function workspaceFindings(
  config: Config,
  password: string,
  report: (finding: Finding) => void,
): Promise<void> {
  let link: Awaited<ReturnType<typeof openLink>>;
  try {
    const entry = await entryAuth({
      gateway: config.gateway,
      shortId: config.short_id,
      password,
      waitSeconds: 0,
    });
    link = await openLink(targetOf(entry), new KnownHosts(path.join(configDir(), 'known_hosts')));
    report({ what: 'ssh', state: 'ok', text: `${entry.ssh_user}@${entry.ssh_host}:${entry.ssh_port}` });
  } catch (error) {
    report(failure('ssh', error));
    return;
  }
  const scratch = mkdtempSync(path.join(tmpdir(), 'ccp-doctor-'));
  try {
    const program = config.session_command.split(/\s+/)[0] ?? '';
    const { stdout } = await execCollect(
      link.client,
      `command -v tmux >/dev/null 2>&1 && echo tmux; command -v ${shellQuote(program)} >/dev/null 2>&1 && echo program`,
    );
    const has = new Set(stdout.split('\n'));
    report(
      has.has('tmux')
        ? { what: 'tmux', state: 'ok', text: 'installed in the workspace' }
        : failure(
            'tmux',
            new ConfigError(
              'not installed in the workspace; ccp needs it: ask the administrator (the workspace image has it)',
            ),
          ),
    );
    report(
      has.has('program')
        ? { what: 'session command', state: 'ok', text: `${program} is installed in the workspace` }
        : {
            what: 'session command',
            state: 'warn',
            text: `${program} is not installed in the workspace, so sessions start your shell; choose another with ccp --session-command <command>`,
          },
    );
    try {
      const mount = await openFolderMount(link.client, scratch, 'link');
      mount.channel.close();
      report({
        what: 'folder mount',
        state: 'ok',
        text: `the gateway mounted a scratch folder over sshfs, so mount_mode ${config.mount_mode} works (nothing to install here)`,
      });
    } catch (error) {
      const text = `${(error as Error).message}; `;
      report(
        config.mount_mode === 'auto'
          ? {
              what: 'folder mount',
              state: 'warn',
              text: `${text}ccp carries on without your folder in the workspace (the administrator can run scripts/folder-mounts.sh ensure)`,
            }
          : failure(
              'folder mount',
              new ConfigError(
                `${text}ccp exits 4 with mount_mode ${config.mount_mode}: use --mount-mode auto, or ask the administrator to run scripts/folder-mounts.sh ensure`,
              ),
            ),
      );
    }
  } finally {
    link.client.end();
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Commands the workspace runs on this machine must be here; git also new enough for the command policy. */
async function proxyCommandFindings(names: string[]): Promise<Finding[]> {
  const findings: Finding[] = [];
  for (const name of names) {
    const what = `local ${name}`;
    if (name !== 'git') {
      const found = await run('sh', ['-c', `command -v ${shellQuote(name)}`]).then(
        (r) => r.stdout.trim(),
        () => '',
      );
      findings.push(
        found
          ? { what, state: 'ok', text: `${found} (proxy_commands)` }
          : {
              what,
              state: 'warn',
              text: `${name} is in proxy_commands but not on this machine's PATH: install it, or remove it from proxy_commands`,
            },
      );
      continue;
    }
    const version = await run('git', ['--version']).then(
      (r) => r.stdout.trim(),
      () => '',
    );
    const [major = 0, minor = 0] = (/(\d+)\.(\d+)/.exec(version) ?? []).slice(1).map(Number);
    const [wantMajor, wantMinor] = GIT_MINIMUM;
    if (!version)
      findings.push({
        what,
        state: 'warn',
        text: 'git is not installed here, so git in the workspace cannot act on your repository: install git (2.32 or later), or set proxy_commands: []',
      });
    else if (major < wantMajor || (major === wantMajor && minor < wantMinor))
      findings.push({
        what,
        state: 'warn',
        text: `${version} is older than ${wantMajor}.${wantMinor}; ccp refuses git calls from the workspace until you update it`,
      });
    else findings.push({ what, state: 'ok', text: `${version} (proxy_commands)` });
  }
  if (names.length === 0)
    findings.push({ what: 'proxy_commands', state: 'skip', text: 'off ([]): nothing runs on this machine' });
  return findings;
}
