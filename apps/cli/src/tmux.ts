import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { attachScript as tmuxAttachScript } from '@ccp/api/tmux';
import { shellQuote } from './ssh-connection.js';

const sanitise = (text: string) => text.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 20) || 'root';

/** The default session of a folder: the folder's name plus a short hash of its path, stable across runs. */
export function defaultSessionName(cwd: string): string {
  const hash = createHash('sha256').update(cwd).digest('hex').slice(0, 6);
  return `${sanitise(path.basename(cwd))}-${hash}`;
}

export function freshSessionName(cwd: string): string {
  return `${sanitise(path.basename(cwd))}-${randomBytes(3).toString('hex')}`;
}

/** The user's shell, in place of what ran. Not a login shell: /etc/profile would reset PATH and hide the
 * command proxy. */
const EXEC_SHELL = `exec "\${SHELL:-/bin/sh}"`;

/**
 * The command line run in a new session: the configured command with the passthrough arguments, or the
 * user's login shell when the command's program is not installed in the workspace.
 */
export function sessionCommandLine(sessionCommand: string, args: string[]): string {
  const program = sessionCommand.split(/\s+/)[0] ?? '';
  const full = [sessionCommand, ...args.map(shellQuote)].join(' ');
  return [
    `if command -v ${shellQuote(program)} >/dev/null 2>&1; then ${full}; else`,
    `echo ${shellQuote(`ccp: ${program} is not installed here; starting your shell`)} >&2;`,
    `${EXEC_SHELL}; fi`,
  ].join(' ');
}

/**
 * Where the session command's failure status is left for the client: tmux itself exits 0 when the session's
 * command ends, so its status would be lost. A shell expression; session names need no quoting.
 */
export const statusFile = (name: string) => `"/tmp/ccp-$(id -u)-${name}.status"`;

/** Prints and removes the status left by the session's command, once the session is gone. */
export const takeStatusScript = (name: string) =>
  `tmux has-session -t ${name} 2>/dev/null || { cat ${statusFile(name)} 2>/dev/null; rm -f ${statusFile(name)}; }`;

/** What an exit status usually says about why a command ended (beyond its own output). */
const STATUS_MEANINGS: Record<number, string> = {
  126: 'found but cannot be run',
  127: 'command not found',
};

function statusMeaning(status: number): string {
  const known = STATUS_MEANINGS[status];
  if (known) return ` (${known})`;
  return status > 128 ? ` (killed by signal ${status - 128})` : '';
}

/** The same meanings, as shell lines that set `w` from the status in `s`. */
const SHELL_STATUS_MEANING = [
  'case "$s" in',
  ...Object.entries(STATUS_MEANINGS).map(([code, text]) => `  ${code}) w=${shellQuote(` (${text})`)} ;;`),
  `  *) w=''; [ "$s" -gt 128 ] && w=" (killed by signal $((s - 128)))" ;;`,
  'esac',
].join('\n');

/** What the user is told when the session command ended with a failure status. */
export function sessionEndedMessage(sessionCommand: string, status: number): string {
  return `the session command \`${sessionCommand}\` ended with status ${status}${statusMeaning(status)}`;
}

/**
 * Run in the pane when the session command failed: its output stays on the screen, under it what ended and
 * how to choose another command, then the user's shell in the same folder, so the terminal stays usable.
 */
export function failureShellScript(sessionCommand: string, configFile: string): string {
  const lines = [
    'ccp: the session command %s exited with status %s%s; its output is above.',
    'ccp: this is your shell in the same folder; `exit` ends the session.',
    'ccp: to start sessions with another command: ccp --session-command <command>,',
    'ccp: or keep one: ccp init --session-command <command> (session_command in %s).',
  ];
  return [
    SHELL_STATUS_MEANING,
    `printf ${shellQuote(`\n${lines.join('\n')}\n`)} ${shellQuote(`\`${sessionCommand}\``)} "$s" "$w" ${shellQuote(configFile)}`,
    EXEC_SHELL,
  ].join('\n');
}

/**
 * Before joining a session that exists: a mount made again (every reconnect) or in another mode (`full` keeps a
 * copy in ~/.ccp/hot/<id>, the others a mount at /run/ccp-mounts/<id>) leaves the session's programs in the
 * old folder: a dead mount, or a copy no longer kept in step (a live mount is fine: `full` links into it). A shell waiting at its prompt is moved to the
 * same place in the live folder (a `cd` typed for it, kept out of its history by the leading space); for any
 * other program the user is told what to type when it ends. Panes elsewhere are left alone.
 */
function staleFolderScript(name: string, cwd: string): string {
  const folder = shellQuote(cwd);
  return `live=$(cd ${folder} 2>/dev/null && pwd -P) || live=
case "$live" in "$HOME"/.ccp/hot/*) id=\${live#"$HOME"/.ccp/hot/} ;; /run/ccp-mounts/*) id=\${live#/run/ccp-mounts/} ;; *) id= ;; esac
if [ -n "$id" ] && tmux has-session -t ${shellQuote(name)} 2>/dev/null; then
  for pane in $(tmux list-panes -s -t ${shellQuote(name)} -F '#{pane_id}:#{pane_pid}'); do
    fg=$(awk '{ print $8 }' "/proc/\${pane#*:}/stat" 2>/dev/null) || continue
    was=$(readlink "/proc/$fg/cwd" 2>/dev/null) || continue
    was=\${was% (deleted)}
    # Stale: a dead mount (a mount taken down lazily no longer has its path), or the copy while the folder is
    # no longer one.
    if ls "/proc/$fg/cwd/" >/dev/null 2>&1; then
      case "$was" in "$HOME"/.ccp/hot/"$id" | "$HOME"/.ccp/hot/"$id"/*) ;; *) continue ;; esac
      case "$live" in "$HOME"/.ccp/hot/*) continue ;; esac
    fi
    case "$was" in
      "$HOME"/.ccp/hot/"$id"/*) rel=/\${was#"$HOME"/.ccp/hot/"$id"/} ;;
      /run/ccp-mounts/"$id"/*) rel=/\${was#/run/ccp-mounts/"$id"/} ;;
      *) rel= ;;
    esac
    to=${folder}$rel; [ -d "$to" ] || to=${folder}
    program=$(cat "/proc/$fg/comm" 2>/dev/null)
    case "$program" in
      bash | zsh | sh | dash | ksh | mksh | fish)
        tmux send-keys -t "\${pane%%:*}" -l " cd -- '$(printf %s "$to" | sed "s/'/'\\\\''/g")'" && tmux send-keys -t "\${pane%%:*}" Enter ;;
      *)
        printf 'ccp: %s in the session is still in the old folder (mounted again); when it ends, type: cd %s\n' "$program" "$to" >&2
        stale=1 ;;
    esac
  done
  [ -z "\${stale:-}" ] || sleep 3
fi`;
}

export interface AttachPlan {
  name: string;
  cwd: string;
  /** Start a session under this name (refused if it exists) instead of attaching or creating. */
  fresh: boolean;
  takeOver: boolean;
  commandLine: string;
  /** Prepended to PATH in a new session (the command proxy's wrappers); a trusted shell expression. */
  pathPrefix: string;
  /** Run in the pane after the command failed (`failureShellScript`), with its status in `s`. */
  onFailure: string;
}

/** The remote shell script that takes over if asked, then attaches to (or creates) the session (@ccp/api/tmux). */
export function attachScript(plan: AttachPlan): string {
  const command = [
    `rm -f ${statusFile(plan.name)}; export PATH="${plan.pathPrefix}:$PATH"; ${plan.commandLine}`,
    's=$?',
    `[ "$s" -eq 0 ] && exit 0`,
    `echo "$s" > ${statusFile(plan.name)}`,
    plan.onFailure,
  ].join('\n');
  return tmuxAttachScript({
    name: plan.name,
    mode: plan.fresh ? 'new' : plan.takeOver ? 'take_over' : 'attach',
    enter: `cd ${shellQuote(plan.cwd)} 2>/dev/null || cd`,
    taker: 'another client',
    beforeJoin: staleFolderScript(plan.name, plan.cwd),
    // PATH is set again in the command: the shell tmux runs it with may rebuild PATH from its own files.
    sessionArgs: `-e "PATH=${plan.pathPrefix}:$PATH" ${shellQuote(command)}`,
  });
}
