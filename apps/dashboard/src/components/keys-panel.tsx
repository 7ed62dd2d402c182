import { AddSshKeyRequest, type GeneratedSshKey, type SshKey } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import type { Static } from 'typebox';
import { when } from '../format';
import { useFieldErrors } from '../use-form';
import { apiFieldErrors } from '../validation';
import { Field } from './field';
import { ActionButton, ErrorText, Loading, OnceSecret, Section } from './ui';

export interface KeysApi {
  list: () => Promise<{ keys: SshKey[] }>;
  add: (body: Static<typeof AddSshKeyRequest>) => Promise<SshKey>;
  generate: (body: { label?: string }) => Promise<GeneratedSshKey>;
  remove: (keyId: string) => Promise<void>;
}

/** SSH keys of one account (an admin managing a user, or a user their own): add, generate, delete. */
export function KeysPanel({ keysApi, queryKey }: { keysApi: KeysApi; queryKey: unknown[] }) {
  const client = useQueryClient();
  const keys = useQuery({ queryKey, queryFn: keysApi.list });
  const [publicKey, setPublicKey] = useState('');
  const [label, setLabel] = useState('');
  const { errors, setErrors, check } = useFieldErrors(AddSshKeyRequest);
  const [generated, setGenerated] = useState<GeneratedSshKey | null>(null);
  const refresh = () => client.invalidateQueries({ queryKey });
  const add = useMutation({
    mutationFn: keysApi.add,
    onSuccess: () => {
      setPublicKey('');
      setLabel('');
      void refresh();
    },
    onError: (error) => setErrors(apiFieldErrors(error)),
  });
  const generate = useMutation({
    mutationFn: () => keysApi.generate(label ? { label } : {}),
    onSuccess: (key) => {
      setGenerated(key);
      setLabel('');
      void refresh();
    },
  });
  const remove = useMutation({ mutationFn: keysApi.remove, onSuccess: () => void refresh() });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body = { public_key: publicKey.trim(), ...(label ? { label } : {}) };
    if (check(body)) add.mutate(body);
  };
  return (
    <Section title="SSH keys">
      {keys.data ? (
        keys.data.keys.length === 0 ? (
          <p className="hint">No keys yet.</p>
        ) : (
          <ul className="plain-list">
            {keys.data.keys.map((key) => (
              <li key={key.id} className="row between wrap">
                <span>
                  <strong>{key.label}</strong> <code className="small">{key.fingerprint}</code>{' '}
                  <span className="hint">
                    {key.key_type} · {when(key.created_at)}
                  </span>
                </span>
                <ActionButton
                  kind="danger"
                  pending={remove.isPending && remove.variables === key.id}
                  onClick={() => remove.mutate(key.id)}
                >
                  Delete key
                </ActionButton>
              </li>
            ))}
          </ul>
        )
      ) : (
        <Loading error={keys.error} />
      )}
      <ErrorText error={remove.error} />
      <form onSubmit={submit} noValidate aria-label="Add SSH key">
        <Field label="Public key" error={errors.public_key} hint="One line: ssh-ed25519 AAAA… comment">
          {(id) => (
            <textarea id={id} rows={2} value={publicKey} onChange={(e) => setPublicKey(e.target.value)} />
          )}
        </Field>
        <Field label="Label (optional)" error={errors.label}>
          {(id) => <input id={id} value={label} onChange={(e) => setLabel(e.target.value)} />}
        </Field>
        <div className="row wrap">
          <ActionButton type="submit" kind="primary" pending={add.isPending}>
            Add key
          </ActionButton>
          <ActionButton pending={generate.isPending} onClick={() => generate.mutate()}>
            Generate a key pair
          </ActionButton>
        </div>
        {add.error && Object.keys(errors).length === 0 ? <ErrorText error={add.error} /> : null}
        <ErrorText error={generate.error} />
      </form>
      {generated ? (
        <OnceSecret
          title={`Key pair "${generated.label}" generated. The private key is not stored anywhere:`}
          lines={[{ label: 'private key', value: generated.private_key }]}
          onDone={() => setGenerated(null)}
        />
      ) : null}
    </Section>
  );
}
