import net from 'node:net';
import { exitVerdict, trustFor, type VerificationPlan } from '../egress/egress-verification.js';
import type { ExecAs } from './container-exec.js';
import { type ExecResult, RuntimeError } from './workspace-runtime.js';

/** Runs a command in the workspace as someone; path-check.ts runs as root and outside its files. */
export type WorkspaceExec = (command: string[], timeoutMs: number, as: ExecAs) => Promise<ExecResult>;

/** Exit status of the script below when the name did not resolve (curl's own are below 100). */
const LOOKUP_FAILED = 100;
const STATUS_MARK = '\nccp-http-status:';

/**
 * What the workspace's user does first, as that user, with the workspace's own files: look a name up through
 * the system resolver (/etc/nsswitch.conf, /etc/resolv.conf), then fetch from it with curl and the system's CA
 * store (plus the CA the plan trusts for that echo, given by content, when it is a private one).
 */
const SCRIPT = `name=$1 url=$2 seconds=$3
if [ -n "$name" ] && ! getent ahostsv4 "$name" >/dev/null 2>&1; then
  if ! unreadable=$(cat /etc/resolv.conf 2>&1 >/dev/null); then echo "$unreadable" >&2
  else echo "no answer for $name from the resolvers in /etc/resolv.conf" >&2; fi
  exit ${LOOKUP_FAILED}
fi
ca=
if [ -n "\${CCP_CHECK_CA:-}" ]; then ca=$(mktemp) && printf '%s\\n' "$CCP_CHECK_CA" >"$ca"; fi
curl -sS --max-time "$seconds" \${ca:+--cacert "$ca"} -w '${STATUS_MARK.replace('\n', '\\n')}%{http_code}' "$url"
status=$?
[ -z "$ca" ] || rm -f "$ca"
exit "$status"
`;

/**
 * Checks, as the workspace's Linux user, that a public name resolves and that fetching from it leaves through
 * the declared exit: a workspace whose user cannot resolve names (an unreadable resolv.conf) is not running,
 * whatever root sees. The echo with a name is used (the plan's first one when all are addresses).
 *
 * Throws RuntimeError `dns_failed`, `upstream_unreachable` or `exit_ip_mismatch`, naming the user.
 */
export async function verifyAsWorkspaceUser(
  exec: WorkspaceExec,
  /** The user's name (for messages), and who the command runs as: the name, or its `uid:gid`. */
  user: { name: string; execAs: string },
  plan: VerificationPlan,
  exitIp: string,
  timeoutMs: number,
): Promise<void> {
  const url = plan.exitIpUrls.find((entry) => net.isIP(new URL(entry).hostname) === 0) ?? plan.exitIpUrls[0];
  if (!url) return;
  const name = new URL(url).hostname;
  const seconds = String(Math.max(1, Math.ceil(timeoutMs / 1000)));
  const trust = trustFor(plan, url);
  const ca = trust.pinned ?? trust.extra;
  const result = await exec(
    ['sh', '-c', SCRIPT, 'sh', net.isIP(name) === 0 ? name : '', url, seconds],
    timeoutMs + 5000,
    { user: user.execAs, env: ca ? [`CCP_CHECK_CA=${ca.trim()}`] : [] },
  );
  const linuxUser = user.name;
  const said = result.stderr.trim().split('\n').slice(-3).join('; ');
  if (result.exitCode === LOOKUP_FAILED)
    throw new RuntimeError(
      'dns_failed',
      `the workspace's user ${linuxUser} cannot resolve ${name} (${said}), although the path checked as root works`,
    );
  const mark = result.stdout.lastIndexOf(STATUS_MARK);
  const verdict = exitVerdict(
    [
      result.exitCode === 0 && mark >= 0
        ? {
            url,
            status: Number(result.stdout.slice(mark + STATUS_MARK.length)),
            body: result.stdout.slice(0, mark),
          }
        : { url, error: said || `curl exited with ${result.exitCode}` },
    ],
    exitIp,
  );
  if (verdict)
    throw new RuntimeError(verdict.code, `as the workspace's user ${linuxUser}: ${verdict.message}`);
}
