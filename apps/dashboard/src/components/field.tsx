import { type ReactNode, useId } from 'react';

/** A labelled form control with its error (from the browser's check or the API's) or else its hint. */
export function Field(props: {
  label: string;
  error?: string | undefined;
  hint?: string | undefined;
  children: (id: string) => ReactNode;
}) {
  const id = useId();
  return (
    <div className={props.error ? 'field invalid' : 'field'}>
      <label htmlFor={id}>{props.label}</label>
      {props.children(id)}
      {props.error ? (
        <span className="field-error" role="alert">
          {props.error}
        </span>
      ) : props.hint ? (
        <span className="hint">{props.hint}</span>
      ) : null}
    </div>
  );
}

/** A labelled text input (or password, or date and time) with its error or hint. */
export function InputField(props: {
  label: string;
  error?: string | undefined;
  hint?: string;
  value: string;
  onChange: (value: string) => void;
  type?: 'password' | 'datetime-local';
  autoComplete?: string;
}) {
  return (
    <Field label={props.label} error={props.error} hint={props.hint}>
      {(id) => (
        <input
          id={id}
          type={props.type}
          autoComplete={props.autoComplete}
          value={props.value}
          onChange={(e) => props.onChange(e.target.value)}
        />
      )}
    </Field>
  );
}
