import type { EgressBudgetAction, EgressBudgetRequest, Host } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api';
import { bytes, when } from '../format';
import { Field, InputField } from './field';
import { ActionButton, ErrorText, Loading, Section } from './ui';

/** What holds a host's egress now: a budget warned of or reached, a throttle, a pause while its exit is in doubt. */
export function HostEgressNotice({ host }: { host: Host }) {
  const { budget, throttle_bytes_per_second: throttle, paused } = host.egress;
  if (!budget && throttle === null && !paused) return null;
  return (
    <div className="notice" role="alert" data-testid="egress-notice">
      {paused ? (
        <p data-testid="egress-paused">
          <strong>Paused since {when(paused.since)}:</strong> {paused.reason}. Its processes are frozen until
          the exit is verified again; open sessions resume then.
        </p>
      ) : null}
      {budget ? (
        <p data-testid="egress-budget-notice">
          <strong>
            Egress budget {budget.state === 'reached' ? 'reached' : 'nearly used'}: {bytes(budget.used_bytes)}{' '}
            of {bytes(budget.limit_bytes)} in {budget.month}.
          </strong>{' '}
          {budget.message}
        </p>
      ) : null}
      {throttle !== null ? (
        <p data-testid="egress-throttled">Its traffic is throttled to {bytes(throttle)}/s each way.</p>
      ) : null}
    </div>
  );
}

const ACTIONS: EgressBudgetAction[] = ['notify', 'throttle', 'stop'];

interface Draft {
  limitMib: string;
  warningPercent: string;
  action: EgressBudgetAction;
  throttleKib: string;
}

/** An admin's form for a host's own monthly egress budget, with this month's use. */
export function HostEgressBudgetPanel({ hostId }: { hostId: string }) {
  const client = useQueryClient();
  const key = ['host', hostId, 'egress-budget'];
  const query = useQuery({
    queryKey: key,
    // None set and no gateway default: a blank form.
    queryFn: () => api.admin.egressBudgets.get('host', hostId).catch(() => null),
  });
  const [draft, setDraft] = useState<Draft | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const done = () => {
    setDraft(null);
    void client.invalidateQueries({ queryKey: key });
    void client.invalidateQueries({ queryKey: ['host', hostId] });
  };
  const save = useMutation({
    mutationFn: (body: EgressBudgetRequest) => api.admin.egressBudgets.set('host', hostId, body),
    onSuccess: done,
  });
  const remove = useMutation({
    mutationFn: () => api.admin.egressBudgets.remove('host', hostId),
    onSuccess: done,
  });
  if (query.isPending) return <Loading error={query.error} />;
  const budget = query.data ?? null;
  const values: Draft = draft ?? {
    limitMib: budget && !budget.global_default ? String(budget.limit_bytes / 1024 / 1024) : '',
    warningPercent: budget && !budget.global_default ? String(budget.warning_percent) : '',
    action: budget?.action ?? 'notify',
    throttleKib: budget && !budget.global_default ? String(budget.throttle_bytes_per_second / 1024) : '',
  };
  const set = (field: keyof Draft) => (value: string) => setDraft({ ...values, [field]: value });
  const submit = () => {
    const limit = Math.round(Number(values.limitMib) * 1024 * 1024);
    if (!(limit >= 1)) return setProblem('A limit in MiB above 0 is needed');
    setProblem(null);
    save.mutate({
      limit_bytes: limit,
      action: values.action,
      ...(values.warningPercent.trim() ? { warning_percent: Number(values.warningPercent) } : {}),
      ...(values.throttleKib.trim()
        ? { throttle_bytes_per_second: Math.round(Number(values.throttleKib) * 1024) }
        : {}),
    });
  };
  return (
    <Section title="Egress budget">
      <p data-testid="egress-budget-use">
        {budget
          ? `${bytes(budget.used_bytes)} of ${bytes(budget.limit_bytes)} used in ${budget.month} (${budget.state}; ` +
            `at the limit: ${budget.action}${budget.global_default ? ", the gateway's default" : ''})`
          : 'No budget: the traffic is only metered.'}
      </p>
      <form
        data-testid="egress-budget-form"
        onSubmit={(event) => {
          event.preventDefault();
          submit();
        }}
      >
        <div className="row wrap">
          <InputField
            label="Limit per month, MiB"
            error={problem ?? undefined}
            value={values.limitMib}
            onChange={set('limitMib')}
          />
          <InputField
            label="Warn at, percent"
            hint="Blank: the gateway's default"
            value={values.warningPercent}
            onChange={set('warningPercent')}
          />
          <Field label="At the limit">
            {(id) => (
              <select id={id} value={values.action} onChange={(e) => set('action')(e.target.value)}>
                {ACTIONS.map((action) => (
                  <option key={action} value={action}>
                    {action}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <InputField
            label="Throttle to, KiB/s"
            hint="Blank: the gateway's default"
            value={values.throttleKib}
            onChange={set('throttleKib')}
          />
        </div>
        <div className="row wrap">
          <ActionButton type="submit" kind="primary" pending={save.isPending}>
            Save budget
          </ActionButton>
          {budget && !budget.global_default ? (
            <ActionButton pending={remove.isPending} onClick={() => remove.mutate()}>
              Remove budget
            </ActionButton>
          ) : null}
        </div>
        <ErrorText error={save.error ?? remove.error} />
      </form>
    </Section>
  );
}
