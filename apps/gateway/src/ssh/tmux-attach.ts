import { randomBytes } from 'node:crypto';
import type { TerminalMode, TerminalSession } from '@ccp/api';
import { isoOut } from '../shared/clock.js';

/**
 * The tmux commands a browser terminal runs in the workspace, as `ccp` runs them (apps/cli/src/tmux.ts): attach
 * to a session or make it, start a fresh one, take one over, list them. Written again here because the gateway
 * does not import the CLI; session names follow the same rule, so either side can join the other's sessions.
 */

/** The session a browser terminal joins when none is named (made on first use). */
export const DEFAULT_SESSION = 'web';

export const SESSION_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** A name for `new` when none was given: `web-` and 6 hex digits. */
export const freshSessionName = () => `web-${randomBytes(3).toString('hex')}`;

/**
 * The script run with a PTY: leaves the user in their home with a UTF-8 locale, detaches the other clients for
 * `take_over` (telling them why first), refuses `new` for a name in use, then execs tmux, so the channel ends
 * when this client leaves the session (detached, taken over, or the session's last shell ended). Session names
 * are checked against SESSION_NAME before they get here and need no quoting.
 */
export function attachScript(name: string, mode: TerminalMode): string {
  if (!SESSION_NAME.test(name)) throw new Error(`not a session name: ${name}`);
  const lines = ['cd 2>/dev/null', `export LANG="\${LANG:-C.UTF-8}"`];
  if (mode === 'take_over')
    lines.push(
      `if tmux has-session -t ${name} 2>/dev/null; then`,
      `  for c in $(tmux list-clients -t ${name} -F '#{client_tty}'); do`,
      `    tmux display-message -c "$c" -d 3000 'ccp: a browser terminal is taking over this session' 2>/dev/null`,
      '  done',
      `  [ -n "$(tmux list-clients -t ${name})" ] && sleep 2`,
      `  tmux detach-client -s ${name} 2>/dev/null`,
      'fi',
    );
  if (mode === 'new')
    lines.push(
      `tmux has-session -t ${name} 2>/dev/null && { echo "ccp: session ${name} exists; attach to it instead" >&2; exit 4; }`,
      `exec tmux new-session -s ${name} -c "$PWD"`,
    );
  else lines.push(`exec tmux new-session -A -s ${name} -c "$PWD"`);
  return lines.join('\n');
}

/** Moves the session's active pane into tmux's history by `lines` (negative: back), as a mouse wheel would with
 * tmux's mouse on; copy mode ends by itself at the bottom (`-e`). */
export function scrollCommand(name: string, lines: number): string {
  if (!SESSION_NAME.test(name)) throw new Error(`not a session name: ${name}`);
  const count = Math.min(Math.abs(Math.trunc(lines)), 500);
  return lines < 0
    ? `tmux copy-mode -e -t ${name} \\; send-keys -t ${name} -X -N ${count} scroll-up 2>/dev/null`
    : `tmux send-keys -t ${name} -X -N ${count} scroll-down 2>/dev/null || true`;
}

export const LIST_SESSIONS =
  "tmux list-sessions -F '#{session_name}\t#{session_created}\t#{session_attached}\t#{session_windows}' 2>/dev/null || true";

export function parseSessions(output: string): TerminalSession[] {
  return output
    .split('\n')
    .map((line) => line.split('\t'))
    .filter(([name, ...rest]) => name !== undefined && SESSION_NAME.test(name) && rest.length === 3)
    .map(([name = '', created = '0', attached = '0', windows = '0']) => ({
      name,
      created_at: isoOut(new Date(Number(created) * 1000).toISOString()),
      attached_clients: Number(attached),
      windows: Number(windows),
    }));
}
