import { randomBytes } from 'node:crypto';
import type { TerminalMode } from '@ccp/api';
import { sessionNameInScript, attachScript as tmuxAttachScript } from '@ccp/api/tmux';

/**
 * What a browser terminal runs in the workspace beyond the tmux commands it shares with `ccp` (@ccp/api/tmux):
 * its default and fresh session names, its attach script, and scrolling.
 */

/** The session a browser terminal joins when none is named (made on first use). */
export const DEFAULT_SESSION = 'web';

/** A name for `new` when none was given: `web-` and 6 hex digits. */
export const freshSessionName = () => `web-${randomBytes(3).toString('hex')}`;

/** Attaches, starts or takes over `name` in the user's home (@ccp/api/tmux's attachScript). */
export function attachScript(name: string, mode: TerminalMode): string {
  return tmuxAttachScript({ name, mode, enter: 'cd 2>/dev/null', taker: 'a browser terminal' });
}

/** Moves the session's active pane into tmux's history by `lines` (negative: back), as a mouse wheel would with
 * tmux's mouse on; copy mode ends by itself at the bottom (`-e`). */
export function scrollCommand(session: string, lines: number): string {
  const name = sessionNameInScript(session);
  const count = Math.min(Math.abs(Math.trunc(lines)), 500);
  return lines < 0
    ? `tmux copy-mode -e -t ${name} \\; send-keys -t ${name} -X -N ${count} scroll-up 2>/dev/null`
    : `tmux send-keys -t ${name} -X -N ${count} scroll-down 2>/dev/null || true`;
}
