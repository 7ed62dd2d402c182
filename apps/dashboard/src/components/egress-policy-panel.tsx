import type { EffectiveEgressPolicy, EgressPolicy, EgressRule } from '@ccp/api';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api';
import { apiFieldErrors } from '../validation';
import { ActionButton, ErrorText, Loading, Section } from './ui';

const SOURCE: Record<EffectiveEgressPolicy['source'], string> = {
  host: "the host's own",
  user: "the owner's default",
  global: "the gateway's (EGRESS_POLICY)",
  none: 'none: everything allowed',
};

/** A rule as one line of the form: `allow|deny <name, *.name, address or CIDR, or *> [port or range]`. */
export function ruleLine(rule: EgressRule): string {
  return [rule.action, rule.domain ?? rule.address ?? '*', rule.port ?? ''].join(' ').trim();
}

const ADDRESS = /^[0-9a-f.:]+(\/\d+)?$/i;

/** The rules of the form's text, one a line; a line that is no rule is named with what is wanted. */
export function rulesOf(text: string): { rules: EgressRule[]; problems: string[] } {
  const rules: EgressRule[] = [];
  const problems: string[] = [];
  text.split('\n').forEach((line, index) => {
    const words = line.trim().split(/\s+/).filter(Boolean);
    if (words.length === 0) return;
    const [action, target, port, extra] = words;
    if ((action !== 'allow' && action !== 'deny') || !target || extra !== undefined) {
      problems.push(`line ${index + 1}: write allow or deny, then a name, address or *, then a port if any`);
      return;
    }
    rules.push({
      action,
      ...(target === '*'
        ? {}
        : ADDRESS.test(target)
          ? { address: target }
          : { domain: target.toLowerCase() }),
      ...(port ? { port } : {}),
    });
  });
  return { rules, problems };
}

/** The gateway's messages for `rules.N...`, said of the form's lines. */
function apiProblems(error: unknown, lines: number[]): string[] {
  return Object.entries(apiFieldErrors(error)).map(([field, message]) => {
    const match = /^rules\.(\d+)/.exec(field);
    return match ? `line ${(lines[Number(match[1])] ?? 0) + 1}: ${message}` : `${field}: ${message}`;
  });
}

/** The policy a host follows, as a table of its rules. */
function EffectivePolicy({ policy }: { policy: EffectiveEgressPolicy }) {
  // The same rule may come twice: each row's key counts its line's occurrences.
  const seen = new Map<string, number>();
  const rows = policy.rules.map((rule) => {
    const line = ruleLine(rule);
    seen.set(line, (seen.get(line) ?? 0) + 1);
    return { rule, key: `${line}#${seen.get(line)}` };
  });
  return (
    <div data-testid="effective-egress-policy">
      <p>
        Follows {SOURCE[policy.source]}: mode <strong>{policy.mode}</strong>, default{' '}
        <strong>{policy.default_action}</strong>, {policy.rules.length} rules
      </p>
      {policy.rules.length > 0 ? (
        <table className="table">
          <thead>
            <tr>
              <th>#</th>
              <th>Action</th>
              <th>Name or address</th>
              <th>Port</th>
            </tr>
          </thead>
          <tbody>
            {rows.map(({ rule, key }, index) => (
              <tr key={key}>
                <td>{index + 1}</td>
                <td>{rule.action}</td>
                <td>{rule.domain ?? rule.address ?? 'any'}</td>
                <td>{rule.port ?? 'any'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </div>
  );
}

/** An admin's form for a host's own egress policy, with the one it follows now; a running host follows a save at once. */
export function HostEgressPolicyPanel({ hostId }: { hostId: string }) {
  const client = useQueryClient();
  const key = ['host', hostId, 'egress-policy'];
  const query = useQuery({ queryKey: key, queryFn: () => api.admin.hosts.egressPolicy(hostId) });
  const [draft, setDraft] = useState<{ mode: string; defaultAction: string; rules: string } | null>(null);
  const [problems, setProblems] = useState<string[]>([]);
  const [lines, setLines] = useState<number[]>([]);
  const done = (updated: Awaited<ReturnType<typeof api.admin.hosts.egressPolicy>>) => {
    client.setQueryData(key, updated);
    setDraft(null);
    void client.invalidateQueries({ queryKey: ['host', hostId] });
  };
  const save = useMutation({
    mutationFn: (policy: EgressPolicy) => api.admin.hosts.setEgressPolicy(hostId, policy),
    onSuccess: done,
  });
  const remove = useMutation({
    mutationFn: () => api.admin.hosts.removeEgressPolicy(hostId),
    onSuccess: done,
  });
  if (!query.data) return <Loading error={query.error} />;
  const start = query.data.host ?? query.data.effective;
  const values = draft ?? {
    mode: start.mode,
    defaultAction: start.default_action,
    rules: start.rules.map(ruleLine).join('\n'),
  };
  const shown = [...problems, ...apiProblems(save.error, lines)];
  return (
    <Section title="Egress policy">
      <EffectivePolicy policy={query.data.effective} />
      <form
        data-testid="egress-policy-form"
        onSubmit={(event) => {
          event.preventDefault();
          const parsed = rulesOf(values.rules);
          setProblems(parsed.problems);
          setLines(
            values.rules
              .split('\n')
              .map((line, index) => (line.trim() ? index : -1))
              .filter((index) => index >= 0),
          );
          if (parsed.problems.length === 0)
            save.mutate({
              mode: values.mode as EgressPolicy['mode'],
              default_action: values.defaultAction as EgressPolicy['default_action'],
              rules: parsed.rules,
            });
        }}
      >
        <div className="row wrap">
          <label>
            Mode{' '}
            <select
              aria-label="Mode"
              value={values.mode}
              onChange={(e) => setDraft({ ...values, mode: e.target.value })}
            >
              <option value="off">off</option>
              <option value="log-only">log-only</option>
              <option value="enforce">enforce</option>
            </select>
          </label>
          <label>
            Default{' '}
            <select
              aria-label="Default action"
              value={values.defaultAction}
              onChange={(e) => setDraft({ ...values, defaultAction: e.target.value })}
            >
              <option value="allow">allow</option>
              <option value="deny">deny</option>
            </select>
          </label>
        </div>
        <label>
          Rules, one a line, the first that matches deciding: <code>allow *.github.com</code>,{' '}
          <code>deny 203.0.113.0/24</code>, <code>allow api.example.com 443</code>, <code>deny * 25</code>
          <textarea
            aria-label="Rules"
            rows={6}
            value={values.rules}
            onChange={(e) => setDraft({ ...values, rules: e.target.value })}
          />
        </label>
        {shown.map((problem) => (
          <p key={problem} className="field-error">
            {problem}
          </p>
        ))}
        <div className="row">
          <ActionButton type="submit" kind="primary" pending={save.isPending}>
            Save egress policy
          </ActionButton>
          {query.data.host ? (
            <ActionButton pending={remove.isPending} onClick={() => remove.mutate()}>
              Follow the owner's default
            </ActionButton>
          ) : null}
        </div>
        {shown.length === 0 ? <ErrorText error={save.error ?? remove.error} /> : null}
      </form>
    </Section>
  );
}
