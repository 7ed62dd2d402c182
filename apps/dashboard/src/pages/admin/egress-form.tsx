import {
  type CreateEgressIpRequest,
  type EgressIp,
  PROXY_TYPES,
  type ProxyType,
  SHADOWSOCKS_METHODS,
  VMESS_SECURITIES,
} from '@ccp/api';
import { type FormEvent, type ReactNode, useState } from 'react';
import { Field } from '../../components/field';
import { ActionButton, ErrorText } from '../../components/ui';
import type { FieldErrors } from '../../validation';
import { type EgressFormValues, initialValues, PARTS, toProxyConfig, validateEgress } from './egress-config';

export function EgressForm(props: {
  existing?: EgressIp;
  pending: boolean;
  error: unknown;
  serverErrors: FieldErrors;
  submitLabel: string;
  onSubmit: (body: CreateEgressIpRequest) => void;
}) {
  const editing = props.existing !== undefined;
  const [values, setValues] = useState<EgressFormValues>(() => initialValues(props.existing));
  const [localErrors, setLocalErrors] = useState<FieldErrors>({});
  const errors = { ...props.serverErrors, ...localErrors };
  const parts = PARTS[values.type];
  const set = <K extends keyof EgressFormValues>(key: K, value: EgressFormValues[K]) =>
    setValues((v) => ({ ...v, [key]: value }));
  const text = (
    key: keyof EgressFormValues,
    label: string,
    errorKey: string,
    extra: { type?: string; hint?: string; placeholder?: string } = {},
  ): ReactNode => (
    <Field label={label} error={errors[errorKey]} {...(extra.hint ? { hint: extra.hint } : {})}>
      {(id) => (
        <input
          id={id}
          type={extra.type ?? 'text'}
          autoComplete="off"
          placeholder={extra.placeholder}
          value={values[key] as string}
          onChange={(e) => set(key, e.target.value as never)}
        />
      )}
    </Field>
  );
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const found = validateEgress(values, editing);
    setLocalErrors(found);
    if (Object.keys(found).length > 0) return;
    props.onSubmit({
      label: values.label,
      ip_address: values.ip_address.trim(),
      proxy_config: toProxyConfig(values, editing),
    });
    // The secret leaves the page once sent.
    set('secret', '');
  };
  const secretLabel = parts.secret === 'uuid' ? 'User id (UUID)' : 'Password';
  return (
    <form onSubmit={submit} noValidate aria-label={props.submitLabel}>
      <div className="form-grid">
        {text('label', 'Label', 'label')}
        {text('ip_address', 'Exit IP address', 'ip_address', {
          hint: 'The address the upstream leaves from',
        })}
        <Field label="Protocol" error={errors['proxy_config.type']}>
          {(id) => (
            <select id={id} value={values.type} onChange={(e) => set('type', e.target.value as ProxyType)}>
              {PROXY_TYPES.map((t) => (
                <option key={t} value={t}>
                  {t}
                </option>
              ))}
            </select>
          )}
        </Field>
        {text('server', 'Server', 'proxy_config.server')}
        {text('server_port', 'Port', 'proxy_config.server_port', { type: 'number' })}
        {parts.user ? text('username', 'Username (optional)', 'proxy_config.username') : null}
        {text(
          'secret',
          parts.secretOptional ? `${secretLabel} (optional)` : secretLabel,
          `proxy_config.${parts.secret}`,
          {
            type: 'password',
            ...(editing ? { placeholder: 'unchanged', hint: 'Leave empty to keep the stored one' } : {}),
          },
        )}
        {parts.method ? (
          <Field label="Cipher" error={errors['proxy_config.method']}>
            {(id) => (
              <select id={id} value={values.method} onChange={(e) => set('method', e.target.value)}>
                {SHADOWSOCKS_METHODS.map((m) => (
                  <option key={m}>{m}</option>
                ))}
              </select>
            )}
          </Field>
        ) : null}
        {parts.security ? (
          <Field label="Security" error={errors['proxy_config.security']}>
            {(id) => (
              <select id={id} value={values.security} onChange={(e) => set('security', e.target.value)}>
                {VMESS_SECURITIES.map((m) => (
                  <option key={m}>{m}</option>
                ))}
              </select>
            )}
          </Field>
        ) : null}
      </div>
      {parts.tls ? (
        <fieldset>
          <legend>TLS</legend>
          {parts.tls === 'optional' ? (
            <label className="check">
              <input type="checkbox" checked={values.tls} onChange={(e) => set('tls', e.target.checked)} />{' '}
              Use TLS
            </label>
          ) : null}
          {parts.tls === 'required' || values.tls ? (
            <div className="form-grid">
              {text('tls_server_name', 'Server name (SNI, optional)', 'proxy_config.tls.server_name')}
              <label className="check">
                <input
                  type="checkbox"
                  checked={values.tls_insecure}
                  onChange={(e) => set('tls_insecure', e.target.checked)}
                />{' '}
                Skip certificate check
              </label>
            </div>
          ) : null}
        </fieldset>
      ) : null}
      {parts.ws ? (
        <fieldset>
          <legend>Transport</legend>
          <label className="check">
            <input type="checkbox" checked={values.ws} onChange={(e) => set('ws', e.target.checked)} />{' '}
            WebSocket
          </label>
          {values.ws ? (
            <div className="form-grid">
              {text('ws_path', 'Path', 'proxy_config.transport.path', { placeholder: '/' })}
              {text('ws_host', 'Host header', 'proxy_config.transport.headers')}
            </div>
          ) : null}
        </fieldset>
      ) : null}
      <div className="form-actions">
        <ActionButton type="submit" kind="primary" pending={props.pending}>
          {props.submitLabel}
        </ActionButton>
        <ErrorText error={props.error} />
      </div>
    </form>
  );
}
