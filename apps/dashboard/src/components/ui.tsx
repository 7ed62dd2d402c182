import { ApiError, type HostStatus, type Task } from '@ccp/api';
import { type ReactNode, useEffect, useState } from 'react';
import { NODE_UNAVAILABLE_HINT } from '../host-state';

export function messageOf(error: unknown): string {
  if (error instanceof ApiError) return error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

/** The API's message for an action that failed, shown beside the action. */
export function ErrorText({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {messageOf(error)}
    </p>
  );
}

/** A button that shows its action's progress and disables itself meanwhile. */
export function ActionButton(props: {
  onClick?: () => void;
  pending?: boolean;
  children: ReactNode;
  kind?: 'primary' | 'danger' | 'plain';
  type?: 'button' | 'submit';
  disabled?: boolean;
  title?: string;
}) {
  return (
    <button
      type={props.type ?? 'button'}
      className={`button ${props.kind ?? 'plain'}`}
      onClick={props.onClick}
      disabled={props.disabled || props.pending}
      aria-busy={props.pending || undefined}
      title={props.title}
    >
      {props.pending ? <span className="spinner" aria-hidden="true" /> : null}
      {props.children}
    </button>
  );
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    if (!copied) return;
    const timer = setTimeout(() => setCopied(false), 1500);
    return () => clearTimeout(timer);
  }, [copied]);
  return (
    <button
      type="button"
      className="button plain small"
      onClick={() => {
        void navigator.clipboard?.writeText(text).then(() => setCopied(true));
      }}
    >
      {copied ? 'Copied' : label}
    </button>
  );
}

/** A value with a copy button, for commands and SSH details. */
export function CopyField({ label, value, testId }: { label: string; value: string; testId?: string }) {
  return (
    <div className="copy-field">
      <span className="copy-label">{label}</span>
      <code data-testid={testId}>{value}</code>
      <CopyButton text={value} />
    </div>
  );
}

/**
 * A secret the API returns once (a new password, a private key). It lives only in this component's state:
 * dismissing it drops it from the page, and it is never written to storage.
 */
export function OnceSecret(props: {
  title: string;
  lines: { label: string; value: string }[];
  onDone: () => void;
}) {
  return (
    <div className="once-secret" role="status">
      <strong>{props.title}</strong>
      <p className="hint">Shown only now. Copy it before closing this box.</p>
      {props.lines.map((line) => (
        <div key={line.label} className="copy-field">
          <span className="copy-label">{line.label}</span>
          <pre data-testid={`secret-${line.label}`}>{line.value}</pre>
          <CopyButton text={line.value} />
        </div>
      ))}
      <ActionButton onClick={props.onDone}>Done, hide it</ActionButton>
    </div>
  );
}

/** A confirmation step that names what an irreversible action removes. */
export function ConfirmButton(props: {
  label: string;
  question: ReactNode;
  confirmLabel: string;
  onConfirm: () => void;
  pending?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  if (!asking)
    return (
      <ActionButton kind="danger" onClick={() => setAsking(true)}>
        {props.label}
      </ActionButton>
    );
  return (
    <div className="confirm" role="alertdialog" aria-label={props.label}>
      <div>{props.question}</div>
      <div className="row">
        <ActionButton kind="danger" pending={props.pending} onClick={props.onConfirm}>
          {props.confirmLabel}
        </ActionButton>
        <ActionButton onClick={() => setAsking(false)}>Cancel</ActionButton>
      </div>
    </div>
  );
}

export function StatusBadge({ status, title }: { status: string; title?: string | undefined }) {
  return (
    <span className={`badge status-${status}`} title={title}>
      {status.replaceAll('_', ' ')}
    </span>
  );
}

/** A host's status badge; `node unavailable` explains itself on hover. */
export function HostStatusBadge({ status }: { status: HostStatus }) {
  return (
    <StatusBadge status={status} title={status === 'node_unavailable' ? NODE_UNAVAILABLE_HINT : undefined} />
  );
}

export function TaskProgressBar({ task }: { task: Task }) {
  return (
    <div className="task" data-testid="task-progress" data-status={task.status}>
      <div className="row between">
        <span>
          <strong>{task.kind}</strong> · {task.stage || task.status}
        </span>
        <StatusBadge status={task.status} />
      </div>
      <progress max={100} value={task.progress} aria-label={`${task.kind} progress`} />
      {task.message ? <p className="hint">{task.message}</p> : null}
      {task.error ? (
        <p className="error" role="alert">
          {task.error.message} ({task.error.code})
        </p>
      ) : null}
    </div>
  );
}

export function Loading({ error }: { error?: unknown }) {
  if (error) return <ErrorText error={error} />;
  return <p className="hint">Loading…</p>;
}

export function Section({
  title,
  actions,
  children,
}: {
  title: string;
  actions?: ReactNode;
  children: ReactNode;
}) {
  return (
    <section className="card">
      <header className="row between">
        <h2>{title}</h2>
        {actions}
      </header>
      {children}
    </section>
  );
}
