import '@xterm/xterm/css/xterm.css';
import type { Role, TerminalMode } from '@ccp/api';
import { useQuery } from '@tanstack/react-query';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import { useEffect, useRef, useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { api } from '../api';
import { ErrorText } from '../components/ui';
import { mirrorInlineStyles } from '../csp-styles';
import { type ConnectionState, TerminalConnection } from '../terminal-connection';

/** Keys a phone's keyboard lacks, sent as the terminal would send them. */
const KEYS: { label: string; send: string; title: string }[] = [
  { label: 'Esc', send: '\x1b', title: 'Escape' },
  { label: 'Tab', send: '\t', title: 'Tab' },
  { label: '^C', send: '\x03', title: 'Ctrl-C' },
  { label: '^D', send: '\x04', title: 'Ctrl-D' },
  { label: '^B', send: '\x02', title: "Ctrl-B (tmux's prefix)" },
  { label: '←', send: '\x1b[D', title: 'Left' },
  { label: '↓', send: '\x1b[B', title: 'Down' },
  { label: '↑', send: '\x1b[A', title: 'Up' },
  { label: '→', send: '\x1b[C', title: 'Right' },
];

function stateText(state: ConnectionState): string {
  switch (state.kind) {
    case 'connecting':
      return state.attempt > 1 ? `reconnecting (try ${state.attempt})…` : 'connecting…';
    case 'open':
      return `session ${state.session}`;
    case 'reconnecting':
      return `connection lost (${state.why}); reconnecting in ${state.inSeconds} s…`;
    case 'ended':
      return state.why;
  }
}

/**
 * A host's terminal in the browser: a tmux session in the workspace, as `ccp` opens it (attach by default, a new
 * session, or taking one over), drawn by xterm.js and fitted to the window, a phone's included. Copy: select
 * (Ctrl+Shift+C or the Copy button); paste: Ctrl+Shift+V, the browser's paste or the Paste button. Scrolling
 * moves through tmux's history of the session.
 */
export function TerminalPage({ scope }: { scope: Role }) {
  const { hostId = '' } = useParams();
  const [search, setSearch] = useSearchParams();
  const session = search.get('session') ?? undefined;
  const mode = (search.get('mode') ?? 'attach') as TerminalMode;
  const screen = useRef<HTMLDivElement>(null);
  const connection = useRef<TerminalConnection | null>(null);
  const terminal = useRef<Terminal | null>(null);
  const [state, setState] = useState<ConnectionState>({ kind: 'connecting', attempt: 1 });
  const [copyError, setCopyError] = useState<unknown>(null);
  const host = useQuery({
    queryKey: ['terminal-host', scope, hostId],
    queryFn: () => api[scope].hosts.get(hostId),
  });
  const sessions = useQuery({
    queryKey: ['terminal-sessions', hostId],
    queryFn: () => api[scope].hosts.terminal.sessions(hostId),
    refetchInterval: 15_000,
  });

  useEffect(() => {
    const element = screen.current;
    if (!element) return;
    const term = new Terminal({
      cursorBlink: true,
      scrollback: 5000,
      fontSize: window.innerWidth < 500 ? 12 : 14,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, monospace',
      theme: { background: '#111418' },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    const stopMirroring = mirrorInlineStyles(element);
    term.open(element);
    fit.fit();
    terminal.current = term;
    const link = new TerminalConnection(
      scope,
      hostId,
      {
        write: (data) => term.write(data),
        size: () => ({ cols: term.cols, rows: term.rows }),
        state: (next) => {
          setState(next);
          // A new session's name goes into the address (without a re-render), so a reload attaches to it
          // instead of starting yet another.
          if (next.kind === 'open' && mode === 'new') {
            const address = new URL(window.location.href);
            address.searchParams.set('session', next.session);
            address.searchParams.delete('mode');
            window.history.replaceState(window.history.state, '', address);
          }
        },
      },
      { ...(session ? { session } : {}), mode },
    );
    connection.current = link;
    term.onData((data) => link.send(data));
    term.onBinary((data) => link.send(data));
    term.onResize(({ cols, rows }) => link.resize(cols, rows));
    term.attachCustomKeyEventHandler((event) => {
      if (event.type !== 'keydown' || !event.ctrlKey || !event.shiftKey) return true;
      if (event.code === 'KeyC') {
        if (term.hasSelection()) void navigator.clipboard.writeText(term.getSelection()).catch(setCopyError);
        return false;
      }
      if (event.code === 'KeyV') {
        void navigator.clipboard.readText().then((text) => term.paste(text), setCopyError);
        return false;
      }
      return true;
    });
    // tmux draws on the alternate screen, which keeps no scrollback of its own: the wheel scrolls tmux's history.
    term.attachCustomWheelEventHandler((event) => {
      if (term.buffer.active.type !== 'alternate') return true;
      const lines = Math.max(1, Math.round(Math.abs(event.deltaY) / 40)) * Math.sign(event.deltaY);
      if (lines !== 0) link.scroll(lines * 3);
      return false;
    });
    const refit = () => fit.fit();
    const observer = new ResizeObserver(refit);
    observer.observe(element);
    term.focus();
    return () => {
      observer.disconnect();
      link.close();
      term.dispose();
      stopMirroring();
      connection.current = null;
      terminal.current = null;
    };
  }, [scope, hostId, session, mode]);

  const send = (text: string) => {
    connection.current?.send(text);
    terminal.current?.focus();
  };
  const copy = () => {
    const text = terminal.current?.getSelection() ?? '';
    if (text) navigator.clipboard.writeText(text).catch(setCopyError);
    terminal.current?.focus();
  };
  const paste = () => {
    // The terminal takes the keys again: Enter must not press the button a second time.
    navigator.clipboard.readText().then((text) => {
      terminal.current?.paste(text);
      terminal.current?.focus();
    }, setCopyError);
  };
  const open = (next: { session?: string; mode: TerminalMode }) => {
    const params = new URLSearchParams();
    if (next.session) params.set('session', next.session);
    if (next.mode !== 'attach') params.set('mode', next.mode);
    setSearch(params);
  };
  const back = scope === 'admin' ? `/admin/hosts/${hostId}` : `/portal/hosts/${hostId}`;
  const current = state.kind === 'open' ? state.session : session;
  const others = (sessions.data?.items ?? []).filter((s) => s.name !== current);

  return (
    <div className="terminal-page" data-testid="terminal-page">
      <header className="terminal-bar">
        <Link to={back} className="button plain small">
          ← {host.data ? `Host ${host.data.short_id}` : 'Host'}
        </Link>
        <span className={`terminal-state terminal-${state.kind}`} data-testid="terminal-state" role="status">
          {stateText(state)}
        </span>
        <span className="spacer" />
        <select
          className="terminal-sessions"
          aria-label="tmux session"
          // The list is read again when it is about to be used: sessions come and go from other clients.
          onFocus={() => void sessions.refetch()}
          value=""
          onChange={(event) => {
            const [action, name] = event.target.value.split(':');
            if (action === 'new') open({ mode: 'new' });
            else if (name) open({ session: name, mode: action === 'take' ? 'take_over' : 'attach' });
          }}
        >
          <option value="">Sessions…</option>
          {others.map((s) => (
            <option key={s.name} value={`attach:${s.name}`}>
              Attach {s.name} ({s.attached_clients} attached)
            </option>
          ))}
          {others
            .filter((s) => s.attached_clients > 0)
            .map((s) => (
              <option key={`take-${s.name}`} value={`take:${s.name}`}>
                Take over {s.name}
              </option>
            ))}
          <option value="new:">New session</option>
        </select>
      </header>
      <div className="terminal-screen" ref={screen} data-testid="terminal-screen" />
      {/* A press on the bar does not take the focus from the terminal: a phone's keyboard stays up, and Enter
          goes to the terminal, not to the last button pressed. */}
      <div
        className="terminal-keys"
        role="toolbar"
        aria-label="Keys"
        onPointerDown={(event) => event.preventDefault()}
        onMouseDown={(event) => event.preventDefault()}
      >
        {KEYS.map((key) => (
          <button
            key={key.label}
            type="button"
            className="button small"
            title={key.title}
            onClick={() => send(key.send)}
          >
            {key.label}
          </button>
        ))}
        <button
          type="button"
          className="button small"
          title="Scroll back"
          onClick={() => connection.current?.scroll(-10)}
        >
          ⇞
        </button>
        <button
          type="button"
          className="button small"
          title="Scroll forward"
          onClick={() => connection.current?.scroll(10)}
        >
          ⇟
        </button>
        <button type="button" className="button small" onClick={copy}>
          Copy
        </button>
        <button type="button" className="button small" onClick={paste}>
          Paste
        </button>
      </div>
      {copyError ? <ErrorText error={copyError} /> : null}
    </div>
  );
}
