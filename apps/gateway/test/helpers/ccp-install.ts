import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** The gateway's public name in the install tests; each home's ~/.curlrc leads it to the loopback. */
export const GATEWAY_NAME = 'gw.example.test';

/** A home under `dir` whose ~/.curlrc holds `curlrc` (`resolve`, `connect-to`, `cacert` lines), as a user's may. */
export function homeWithCurlrc(dir: string, label: string, curlrc: string[] = []): string {
  const home = mkdtempSync(path.join(dir, `home-${label}-`));
  if (curlrc.length > 0) writeFileSync(path.join(home, '.curlrc'), `${curlrc.join('\n')}\n`);
  return home;
}

/**
 * `curl -fsSL <url>/v1/cli/install | <shell>` with `home` as HOME; `script` replaces the download when given.
 * Asynchronous: the gateway answering curl may run in the calling process.
 */
export function installCcp(
  shell: string,
  home: string,
  url: string,
  script?: string,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const command = script === undefined ? `curl -fsSL '${url}/v1/cli/install' | ${shell}` : shell;
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', command], {
      env: { PATH: process.env.PATH ?? '', HOME: home },
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(script ?? '');
  });
}
