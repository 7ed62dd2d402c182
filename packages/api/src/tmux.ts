/**
 * The tmux commands `ccp` and the browser terminal run in a workspace to join its sessions, written once so that
 * either joins the other's sessions under the same names and a take-over from one detaches the other's clients.
 * Plain shell text without dependencies: ccp bundles this module alone (`@ccp/api/tmux`), not the schemas.
 */

/** A session name as ccp and the terminal API take it: letters, digits, `_` and `-`, never needing quotes. */
export const SESSION_NAME_PATTERN = '^[A-Za-z0-9_-]{1,64}$';

const SESSION_NAME = new RegExp(SESSION_NAME_PATTERN);

export function validSessionName(name: string): boolean {
  return SESSION_NAME.test(name);
}

/** The name, once checked: only a plain session name is ever spliced into a script. */
export function sessionNameInScript(name: string): string {
  if (!validSessionName(name)) throw new Error(`not a session name: ${name}`);
  return name;
}

export interface AttachScript {
  name: string;
  /** `attach` joins the session or makes it, `new` makes one that must not exist, `take_over` detaches the others. */
  mode: 'attach' | 'new' | 'take_over';
  /** The shell line that enters the folder a new session starts in. */
  enter: string;
  /** Who takes the session over, as its other clients are told: "ccp: <taker> is taking over this session". */
  taker: string;
  /** Run before joining a session that may exist (not for `new`). */
  beforeJoin?: string;
  /** Shell words after `tmux new-session -s <name> -c "$PWD"`: more options, then the session's command. */
  sessionArgs?: string;
}

/**
 * The script run with a PTY: enters the folder with a UTF-8 locale, detaches the other clients for `take_over`
 * (telling them why first), refuses `new` for a name in use (exit 4), then execs tmux, so the channel ends when
 * this client leaves the session (detached, taken over, or the session's last shell ended).
 */
export function attachScript(script: AttachScript): string {
  const name = sessionNameInScript(script.name);
  const lines = [script.enter, `export LANG="\${LANG:-C.UTF-8}"`];
  if (script.mode === 'take_over')
    lines.push(
      `if tmux has-session -t ${name} 2>/dev/null; then`,
      `  for c in $(tmux list-clients -t ${name} -F '#{client_tty}'); do`,
      `    tmux display-message -c "$c" -d 3000 'ccp: ${script.taker} is taking over this session' 2>/dev/null`,
      '  done',
      `  [ -n "$(tmux list-clients -t ${name})" ] && sleep 2`,
      `  tmux detach-client -s ${name} 2>/dev/null`,
      'fi',
    );
  if (script.mode === 'new')
    lines.push(
      `tmux has-session -t ${name} 2>/dev/null && { echo "ccp: session ${name} exists; attach to it instead" >&2; exit 4; }`,
    );
  else if (script.beforeJoin) lines.push(script.beforeJoin);
  const create = ['exec tmux new-session', script.mode === 'new' ? '' : '-A', `-s ${name}`, '-c "$PWD"'];
  lines.push([...create, script.sessionArgs ?? ''].filter(Boolean).join(' '));
  return lines.join('\n');
}

export interface TmuxSession {
  name: string;
  /** RFC 3339, to the second. */
  created_at: string;
  attached_clients: number;
  windows: number;
}

export const LIST_SESSIONS =
  "tmux list-sessions -F '#{session_name}\t#{session_created}\t#{session_attached}\t#{session_windows}' 2>/dev/null || true";

/** The sessions in LIST_SESSIONS' output whose names ccp and the terminal take; other lines are skipped. */
export function parseSessions(output: string): TmuxSession[] {
  return output
    .split('\n')
    .map((line) => line.split('\t'))
    .filter(([name, ...rest]) => name !== undefined && validSessionName(name) && rest.length === 3)
    .map(([name = '', created = '0', attached = '0', windows = '0']) => ({
      name,
      created_at: new Date(Number(created) * 1000).toISOString().replace('.000Z', 'Z'),
      attached_clients: Number(attached),
      windows: Number(windows),
    }));
}
