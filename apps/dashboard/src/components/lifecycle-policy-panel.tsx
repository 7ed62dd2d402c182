import { type EffectiveLifecyclePolicy, LifecyclePolicy, type Weekday } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api';
import { apiFieldErrors, type FieldErrors, validate } from '../validation';
import { InputField } from './field';
import { ActionButton, ErrorText, Loading, Section } from './ui';

const WEEKDAYS: Weekday[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

/** The form's text fields; blank means "inherit" (a host's from its owner, a user's from the gateway). */
interface Draft {
  idleMinutes: string;
  lifetimeHours: string;
  timeZone: string;
  days: Weekday[];
  start: string;
  stop: string;
}

const draftOf = (policy: LifecyclePolicy): Draft => ({
  idleMinutes: policy.idle_timeout_seconds === null ? '' : String(policy.idle_timeout_seconds / 60),
  lifetimeHours: policy.max_lifetime_seconds === null ? '' : String(policy.max_lifetime_seconds / 3600),
  timeZone: policy.schedule?.time_zone ?? '',
  days: policy.schedule?.days ?? ['mon', 'tue', 'wed', 'thu', 'fri'],
  start: policy.schedule?.start ?? '',
  stop: policy.schedule?.stop ?? '',
});

/** Blank is null (inherited); text that is no number stays NaN, which the form refuses before sending. */
const seconds = (text: string, unit: number) => (text.trim() === '' ? null : Math.round(Number(text) * unit));

/** What is wrong with the form's policy, by the API's field names: checked here first, then by the gateway. */
function fieldErrors(draft: Draft, policy: LifecyclePolicy): FieldErrors {
  const errors = validate(LifecyclePolicy, policy);
  if (Number.isNaN(policy.idle_timeout_seconds))
    errors.idle_timeout_seconds = 'A number of minutes is needed';
  if (Number.isNaN(policy.max_lifetime_seconds)) errors.max_lifetime_seconds = 'A number of hours is needed';
  if (policy.schedule && draft.days.length === 0) errors['schedule.days'] = 'Choose at least one day';
  return errors;
}

/** A blank time zone leaves the schedule inherited; the API says what is wrong with the rest. */
const policyOf = (draft: Draft): LifecyclePolicy => ({
  idle_timeout_seconds: seconds(draft.idleMinutes, 60),
  max_lifetime_seconds: seconds(draft.lifetimeHours, 3600),
  schedule:
    draft.timeZone.trim() === ''
      ? null
      : {
          time_zone: draft.timeZone.trim(),
          days: WEEKDAYS.filter((day) => draft.days.includes(day)),
          start: draft.start || null,
          stop: draft.stop || null,
        },
});

const duration = (value: number, unit: number, name: string) =>
  value === 0 ? 'never' : `${Number((value / unit).toFixed(2))} ${name}`;

/** The policy a host follows now, in words. */
function effectiveText(effective: EffectiveLifecyclePolicy): string {
  const schedule = effective.schedule;
  return [
    `idle stop: ${duration(effective.idle_timeout_seconds, 60, 'min')}`,
    `lifetime: ${duration(effective.max_lifetime_seconds, 3600, 'h')}`,
    schedule && (schedule.start || schedule.stop)
      ? `schedule: ${schedule.days.join(', ')} ${schedule.start ?? '—'}–${schedule.stop ?? '—'} (${schedule.time_zone})`
      : 'no schedule',
  ].join(' · ');
}

function PolicyForm(props: {
  policy: LifecyclePolicy;
  inheritsFrom: string;
  pending: boolean;
  error: unknown;
  onSave: (policy: LifecyclePolicy) => void;
}) {
  const [draft, setDraft] = useState<Draft | null>(null);
  const [checked, setChecked] = useState<FieldErrors>({});
  const values = draft ?? draftOf(props.policy);
  const errors = { ...apiFieldErrors(props.error), ...checked };
  const set = (key: 'idleMinutes' | 'lifetimeHours' | 'timeZone' | 'start' | 'stop') => (value: string) =>
    setDraft({ ...values, [key]: value });
  const toggle = (day: Weekday, on: boolean) =>
    setDraft({ ...values, days: on ? [...values.days, day] : values.days.filter((d) => d !== day) });
  return (
    <form
      data-testid="lifecycle-policy-form"
      onSubmit={(event) => {
        event.preventDefault();
        const policy = policyOf(values);
        const found = fieldErrors(values, policy);
        setChecked(found);
        if (Object.keys(found).length === 0) props.onSave(policy);
      }}
    >
      <p className="muted">Blank: {props.inheritsFrom}. 0: never.</p>
      <div className="row wrap top">
        <InputField
          label="Idle stop after, minutes"
          error={errors.idle_timeout_seconds}
          value={values.idleMinutes}
          onChange={set('idleMinutes')}
        />
        <InputField
          label="Maximum lifetime, hours"
          error={errors.max_lifetime_seconds}
          value={values.lifetimeHours}
          onChange={set('lifetimeHours')}
        />
      </div>
      <p className="muted">Weekly schedule (blank time zone: {props.inheritsFrom})</p>
      <div className="row wrap top">
        <InputField
          label="Time zone"
          error={errors['schedule.time_zone']}
          hint="Such as Europe/Berlin or UTC"
          value={values.timeZone}
          onChange={set('timeZone')}
        />
        <InputField
          label="Start at (HH:MM)"
          error={errors['schedule.start']}
          value={values.start}
          onChange={set('start')}
        />
        <InputField
          label="Stop at (HH:MM)"
          error={errors['schedule.stop']}
          value={values.stop}
          onChange={set('stop')}
        />
      </div>
      {/* Without a time zone there is no schedule here: the days (Monday to Friday to begin with) wait, greyed. */}
      <fieldset
        className="row wrap plain"
        disabled={values.timeZone.trim() === ''}
        data-testid="schedule-days"
      >
        {WEEKDAYS.map((day) => (
          <label key={day} className="check">
            <input
              type="checkbox"
              checked={values.days.includes(day)}
              onChange={(e) => toggle(day, e.target.checked)}
            />{' '}
            {day}
          </label>
        ))}
        {values.timeZone.trim() === '' ? (
          <span className="muted">days apply once a time zone is set</span>
        ) : null}
      </fieldset>
      {errors['schedule.days'] ? <p className="field-error">{errors['schedule.days']}</p> : null}
      <ActionButton type="submit" kind="primary" pending={props.pending}>
        Save policy
      </ActionButton>
      <ErrorText error={props.error} />
    </form>
  );
}

/** An admin's form for a host's own idle stop, lifetime and schedule, with the policy it follows now. */
export function HostPolicyPanel({ hostId }: { hostId: string }) {
  const client = useQueryClient();
  const query = useQuery({
    queryKey: ['host', hostId, 'lifecycle-policy'],
    queryFn: () => api.admin.hosts.lifecyclePolicy(hostId),
  });
  const save = useMutation({
    mutationFn: (policy: LifecyclePolicy) => api.admin.hosts.setLifecyclePolicy(hostId, policy),
    onSuccess: (updated) => {
      client.setQueryData(['host', hostId, 'lifecycle-policy'], updated);
      void client.invalidateQueries({ queryKey: ['host', hostId] });
    },
  });
  if (!query.data) return <Loading error={query.error} />;
  return (
    <Section title="Lifecycle policy">
      <p data-testid="effective-policy">Follows now: {effectiveText(query.data.effective)}</p>
      <PolicyForm
        policy={query.data.host}
        inheritsFrom="the owner's default"
        pending={save.isPending}
        error={save.error}
        onSave={(policy) => save.mutate(policy)}
      />
    </Section>
  );
}

/** An admin's form for the defaults of a user's hosts' idle stop, lifetime and schedule. */
export function UserHostPolicyPanel({ userId }: { userId: string }) {
  const client = useQueryClient();
  const query = useQuery({
    queryKey: ['users', userId, 'host-policy'],
    queryFn: () => api.admin.users.hostPolicy(userId),
  });
  const save = useMutation({
    mutationFn: (policy: LifecyclePolicy) => api.admin.users.setHostPolicy(userId, policy),
    onSuccess: (updated) => client.setQueryData(['users', userId, 'host-policy'], updated),
  });
  if (!query.data) return <Loading error={query.error} />;
  return (
    <Section title="Host lifecycle defaults">
      <PolicyForm
        policy={query.data}
        inheritsFrom="the gateway's setting"
        pending={save.isPending}
        error={save.error}
        onSave={(policy) => save.mutate(policy)}
      />
    </Section>
  );
}
