import { randomUUID } from 'node:crypto';
import type {
  Actor,
  CreateEgressIpRequest,
  EgressIp,
  EgressTestResult,
  ProxyConfig,
  UpdateEgressIpRequest,
} from '@ccp/api';
import type { EgressTester } from '../../egress/egress-tester.js';
import { maskProxyConfig, mergeMaskedSecrets, validateProxyConfig } from '../../egress/proxy-config.js';
import { type EventBus, systemActor } from '../../events/event-bus.js';
import { isoOut, nowIso } from '../../shared/clock.js';
import type { EgressIpRow, EgressIpsRepository } from '../../store/egress-ips-repository.js';
import { violates } from '../../store/errors.js';
import type { SecretBox } from '../access/secret-box.js';
import { DomainError, errors, type FieldProblem } from '../errors.js';

/** The service tests upstreams with egress/'s tester; its callers name it through here. */
export type { EgressTester };

function invalid(problems: FieldProblem[]) {
  const first = problems[0]!;
  return errors.validation(problems, `Invalid field ${first.field}: ${first.message}`);
}

function validated(input: unknown): ProxyConfig {
  const result = validateProxyConfig(input);
  if (!result.ok) throw invalid(result.problems);
  return result.value;
}

/** The update's config with masked secrets filled in from the stored one, validated whole. */
function merged(input: unknown, stored: ProxyConfig): ProxyConfig {
  const result = mergeMaskedSecrets(input, stored);
  if (!result.ok) throw invalid(result.problems);
  return validated(result.value);
}

/** Egress IPs: the upstream proxies hosts send their traffic through. Credentials are sealed at rest. */
export class EgressIpsService {
  constructor(
    private readonly egressIps: EgressIpsRepository,
    private readonly box: SecretBox,
    private readonly bus: EventBus,
    private readonly tester: EgressTester,
  ) {}

  /** The unmasked upstream, for the parts that dial it (egress gateways, the egress test). */
  async proxyConfig(id: string): Promise<{ row: EgressIpRow; config: ProxyConfig }> {
    const row = await this.require(id);
    return { row, config: this.open(row) };
  }

  async create(input: CreateEgressIpRequest, actor: Actor): Promise<EgressIp> {
    const config = validated(input.proxy_config);
    const now = nowIso();
    const row = await this.egressIps.insert({
      id: randomUUID(),
      label: input.label.trim(),
      ip_address: input.ip_address.toLowerCase(),
      tunnel_type: input.tunnel_type ?? 'proxy',
      provider: input.provider ?? 'manual',
      proxy_config_sealed: this.box.seal(JSON.stringify(config)),
      last_test: null,
      last_test_ok: null,
      created_at: now,
      updated_at: now,
    });
    const view = await this.view(row);
    await this.bus.emit({
      type: 'egress_ip.created',
      message: `egress IP ${row.label} created`,
      actor,
      data: logged(view),
    });
    return view;
  }

  async list(): Promise<EgressIp[]> {
    const rows = await this.egressIps.list();
    const bound = await this.egressIps.boundHostIds(rows.map((r) => r.id));
    return rows.map((row) => this.toView(row, bound.get(row.id) ?? []));
  }

  async get(id: string): Promise<EgressIp> {
    return this.view(await this.require(id));
  }

  /**
   * Replaces the given fields. A new upstream (config or declared exit) that running hosts would switch to at
   * once is tested first: when it fails, nothing is stored and the answer is 422 `egress_test_failed`.
   */
  async update(id: string, input: UpdateEgressIpRequest, actor: Actor): Promise<EgressIp> {
    const row = await this.require(id);
    const stored = this.open(row);
    const config = input.proxy_config === undefined ? stored : merged(input.proxy_config, stored);
    const ipAddress = input.ip_address?.toLowerCase() ?? row.ip_address;
    const upstreamChanged = JSON.stringify(config) !== JSON.stringify(stored) || ipAddress !== row.ip_address;
    const running = upstreamChanged ? await this.egressIps.runningHostIds(id) : [];
    const tested = running.length > 0 ? await this.tester.test(config, ipAddress) : null;
    if (tested && !tested.ok) {
      await this.emitResult(row, tested, actor, 'egress_ip.update.refused', running);
      throw new DomainError(
        'unprocessable',
        'egress_test_failed',
        `The new upstream failed its test (${failedChecks(tested).join('; ')}); nothing was changed, and the ` +
          'running hosts keep the current one',
        { test_result: tested, host_ids: running },
      );
    }
    const updated = await this.egressIps.update(id, {
      ...(input.label !== undefined ? { label: input.label.trim() } : {}),
      ip_address: ipAddress,
      ...(input.provider !== undefined ? { provider: input.provider } : {}),
      proxy_config_sealed: this.box.seal(JSON.stringify(config)),
      // A new upstream keeps the test it just passed, or has not been tested yet.
      ...(upstreamChanged
        ? { last_test: tested ? JSON.stringify(tested) : null, last_test_ok: tested ? 1 : null }
        : {}),
      updated_at: nowIso(),
    });
    const view = await this.view(updated!);
    await this.bus.emit({
      type: 'egress_ip.updated',
      message: `egress IP ${view.label} updated`,
      actor,
      data: { ...logged(view), upstream_changed: upstreamChanged },
    });
    if (upstreamChanged) {
      const replaced = { label: row.label, ipAddress: row.ip_address, config: stored };
      await this.bus.emit({ type: 'egress_ip.upstream_changed', egressIpId: id, replaced });
    }
    return view;
  }

  async delete(id: string, actor: Actor): Promise<void> {
    const row = await this.require(id);
    const bound = (await this.egressIps.boundHostIds([id])).get(id) ?? [];
    if (bound.length > 0) throw boundConflict(bound);
    try {
      await this.egressIps.delete(id);
    } catch (error) {
      // A binding created between the check and the delete still meets the foreign key.
      if (violates(error, 'foreign_key')) {
        throw boundConflict((await this.egressIps.boundHostIds([id])).get(id) ?? []);
      }
      throw error;
    }
    await this.bus.emit({
      type: 'egress_ip.deleted',
      message: `egress IP ${row.label} deleted`,
      actor,
      data: { egress_ip_id: id, label: row.label },
    });
  }

  /** An admin's test: stored, and always in the event log. */
  async test(id: string, actor: Actor): Promise<EgressTestResult> {
    const { row, result } = await this.runTest(id);
    await this.emitResult(row, result, actor, result.ok ? 'egress_ip.test.passed' : 'egress_ip.test.failed');
    return result;
  }

  /**
   * The health round's test: stored and visible on the egress IP and in /metrics, but logged only when something
   * changed (passed to failed, failed to passed, a new exit address), so periodic passes never bury what matters.
   */
  async recheck(id: string): Promise<EgressTestResult> {
    const { row, result } = await this.runTest(id);
    const before = row.last_test ? (JSON.parse(row.last_test) as EgressTestResult) : null;
    const observed = result.checks.exit_ip.observed;
    if (observed !== null && observed !== row.ip_address && observed !== before?.checks.exit_ip.observed) {
      await this.emitResult(row, result, systemActor, 'egress_ip.exit_ip.drifted');
    } else if (before?.ok !== result.ok && (before !== null || !result.ok)) {
      await this.emitResult(
        row,
        result,
        systemActor,
        result.ok ? 'egress_ip.test.recovered' : 'egress_ip.test.failed',
      );
    }
    return result;
  }

  private async runTest(id: string): Promise<{ row: EgressIpRow; result: EgressTestResult }> {
    const { row, config } = await this.proxyConfig(id);
    const result = await this.tester.test(config, row.ip_address);
    await this.egressIps.update(id, { last_test: JSON.stringify(result), last_test_ok: result.ok ? 1 : 0 });
    return { row, result };
  }

  private async emitResult(
    row: EgressIpRow,
    result: EgressTestResult,
    actor: Actor,
    type:
      | 'egress_ip.test.passed'
      | 'egress_ip.test.failed'
      | 'egress_ip.test.recovered'
      | 'egress_ip.exit_ip.drifted'
      | 'egress_ip.update.refused',
    hostIds: string[] = [],
  ): Promise<void> {
    const failed = failedChecks(result).join('; ');
    const message = {
      'egress_ip.test.passed': `egress test of ${row.label} passed in ${result.duration_ms} ms`,
      'egress_ip.test.recovered': `egress IP ${row.label} passes its checks again`,
      'egress_ip.test.failed': `egress test of ${row.label} failed (${failed})`,
      'egress_ip.exit_ip.drifted': `egress IP ${row.label} now leaves from ${result.checks.exit_ip.observed}, not the declared ${row.ip_address}`,
      'egress_ip.update.refused': `update of egress IP ${row.label} refused: the new upstream failed its test (${failed})`,
    }[type];
    const level = type === 'egress_ip.test.passed' || type === 'egress_ip.test.recovered' ? 'info' : 'warn';
    const data = { egress_ip_id: row.id, label: row.label, result };
    await this.bus.emit(
      type === 'egress_ip.update.refused'
        ? { type, level, message, actor, data: { ...data, host_ids: hostIds } }
        : { type, level, message, actor, data },
    );
  }

  private async require(id: string): Promise<EgressIpRow> {
    const row = await this.egressIps.findById(id);
    if (!row) throw errors.notFound('Egress IP');
    return row;
  }

  private open(row: EgressIpRow): ProxyConfig {
    return JSON.parse(this.box.open(row.proxy_config_sealed)) as ProxyConfig;
  }

  private async view(row: EgressIpRow): Promise<EgressIp> {
    return this.toView(row, (await this.egressIps.boundHostIds([row.id])).get(row.id) ?? []);
  }

  private toView(row: EgressIpRow, boundHostIds: string[]): EgressIp {
    return {
      id: row.id,
      label: row.label,
      ip_address: row.ip_address,
      tunnel_type: 'proxy',
      provider: row.provider,
      proxy_config: maskProxyConfig(this.open(row)),
      bound_host_ids: boundHostIds,
      last_test: row.last_test ? (JSON.parse(row.last_test) as EgressTestResult) : null,
      created_at: isoOut(row.created_at),
      updated_at: isoOut(row.updated_at),
    };
  }
}

/** What the event log keeps of an egress IP that was created or changed. */
function logged(view: EgressIp) {
  return {
    egress_ip_id: view.id,
    label: view.label,
    ip_address: view.ip_address,
    type: view.proxy_config.type,
  };
}

export function failedChecks(result: EgressTestResult): string[] {
  return Object.entries(result.checks)
    .filter(([, check]) => !check.ok)
    .map(([name, check]) => `${name}: ${check.error ?? 'failed'}`);
}

function boundConflict(hostIds: string[]) {
  return errors.conflict('egress_ip_bound', 'The egress IP is still bound to hosts; unbind it first', {
    host_ids: hostIds,
  });
}
