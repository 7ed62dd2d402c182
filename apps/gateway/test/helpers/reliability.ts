/**
 * The reliability engine (issue 17), shared by the CI test (apps/gateway/test/ops/reliability.test.ts) and the
 * long run (bench/reliability): a gateway process, three hosts on three egress IPs over the lab's two exits,
 * random operations and faults drawn from a seeded PRNG, and after every step the invariants a user would
 * check: nothing reaches the fake internet except through an exit, each workspace leaves through its current
 * upstream, the database agrees with Docker (no orphan), every task ends, and every SSH session that should
 * live still prints.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import {
  ensureLab,
  type LabDescription,
  readSourceCounters,
  resetSourceCountersWhenQuiet,
  type VariantName,
} from '../../../../test/lab/lab.js';
import { removeDataDir } from '../../../../test/support/data-dir.js';
import { HEAP_FLAGS } from '../../src/node-flags.js';
import { HOST_LABEL } from '../../src/runtime/container-specs.js';
import { api, eventually, type GatewayProcess, labGatewayProcess, REPO_ROOT } from './gateway-process.js';
import { buildTestImages } from './lab-egress.js';
import { removeHostResources } from './lab-gateway.js';
import { type LiveSession, openLiveSession, runClient, until, within } from './openssh.js';
import { HEALTH_ROUND_DONE } from './outages.js';
import { ADMIN_PASSWORD } from './test-gateway.js';

const exec = promisify(execFile);
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const ENTRY = path.join(import.meta.dirname, 'outage-gateway-main.ts');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** How long a new host's set-up at creation may keep its workspace running (or its leftovers after a delete). */
const SET_UP_BOUND_MS = 60_000;

export const OPERATIONS = ['start', 'stop', 'rebuild', 'edit', 'switch', 'recreate'] as const;
export const FAULTS = ['failover', 'kill-v2ray', 'kill-gateway', 'restart-dockerd'] as const;
export type StepKind = (typeof OPERATIONS)[number] | (typeof FAULTS)[number];

export const INVARIANTS = [
  'only exits reach the internet',
  'exit is the current upstream',
  'active binding is the expected one',
  'status is the expected one',
  'database agrees with Docker',
  'no orphan container or volume',
  'every task ends',
  'no transitional state',
  'sessions that should live print',
] as const;
export type Invariant = (typeof INVARIANTS)[number];

export interface ReliabilityOptions {
  seed: number;
  /** Stop after this many steps... */
  steps?: number;
  /** ...or once this much time has gone by (whichever comes first). */
  durationMs?: number;
  /** At most this many dockerd restarts (slow: every container on the engine stops). */
  dockerdRestarts: number;
  log: (line: string) => void;
}

export interface ReliabilityReport {
  seed: number;
  steps: number;
  durationMs: number;
  operations: Record<string, number>;
  faults: Record<string, number>;
  held: Record<Invariant, number>;
  /** Windows of the counter check repeated because a non-exit source appeared (traffic of other lab users). */
  counterRetries: number;
  /** Egress tests an operator ran again after a failover because they failed while the exit was up. */
  egressRetests: number;
  /** Exit checks run again after timing out (a wrong exit is never retried), each logged with the gateway's state. */
  exitRetries: number;
  /** The first invariant that failed, with the step: the run stops there. */
  failure: string | null;
}

/** mulberry32: small, fast and good enough to draw operations; the same seed gives the same run. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed of a run: RELIABILITY_SEED when set (to replay one), otherwise a fresh one. */
export function seedFromEnvironment(): number {
  const given = process.env.RELIABILITY_SEED;
  if (given && /^\d+$/.test(given)) return Number(given) >>> 0;
  return randomBytes(4).readUInt32BE(0);
}

class InvariantFailed extends Error {
  constructor(
    readonly invariant: Invariant,
    detail: string,
  ) {
    super(`${invariant}: ${detail}`);
  }
}

/** Variants an edit moves an egress IP between (the same exit, another protocol). */
const EDIT_VARIANTS: VariantName[] = [
  'vmess-tcp',
  'vless-tcp',
  'trojan-tls',
  'ss-aes-256-gcm',
  'vmess-ws',
  'socks-auth',
  'http-auth',
];

interface EgressModel {
  id: string;
  exit: number;
  variant: VariantName;
}

interface Session {
  live: LiveSession;
}

interface HostModel {
  id: string;
  shortId: string;
  userId: string;
  login: string;
  sshPass: string;
  /** Egress IP ids, oldest binding first (the first healthy one carries the traffic). */
  bindings: string[];
  status: 'created' | 'running' | 'stopped' | 'failed';
  session: Session | null;
}

const LOOP = 'i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.2; done';

const ticks = (session: Session) =>
  session.live.lines.filter((line) => /^tick \d+$/.test(line)).map((line) => Number(line.slice(5)));

export class ReliabilityRun {
  private lab!: LabDescription;
  private gateway!: GatewayProcess;
  private work = mkdtempSync(path.join(tmpdir(), 'ccp-reliability-'));
  private downFile = path.join(this.work, 'down-exits.json');
  private url = '';
  private token = '';
  private sshPort = 0;
  private readonly egress: EgressModel[] = [];
  private readonly hosts: HostModel[] = [];
  /** Every host id this run made (deleted ones too): what cleanup and the orphan check look at. */
  private readonly madeHostIds = new Set<string>();
  private readonly down = new Set<number>();
  private readonly random: () => number;
  private readonly report: ReliabilityReport;
  private dockerdRestarts = 0;
  /** The step under way, for the failure message. */
  private current = 'set-up';
  /** Kinds not drawn yet: the first steps take each of them once, in an order the seed shuffles. */
  private readonly unseen: StepKind[];

  constructor(private readonly options: ReliabilityOptions) {
    this.random = prng(options.seed);
    this.unseen = [...OPERATIONS, ...FAULTS]
      .map((kind) => [this.random(), kind] as const)
      .sort((a, b) => a[0] - b[0])
      .map(([, kind]) => kind);
    this.report = {
      seed: options.seed,
      steps: 0,
      durationMs: 0,
      operations: Object.fromEntries(OPERATIONS.map((kind) => [kind, 0])),
      faults: Object.fromEntries(FAULTS.map((kind) => [kind, 0])),
      held: Object.fromEntries(INVARIANTS.map((name) => [name, 0])) as Record<Invariant, number>,
      counterRetries: 0,
      egressRetests: 0,
      exitRetries: 0,
      failure: null,
    };
  }

  private log(line: string) {
    this.options.log(line);
  }

  private pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.random() * items.length)]!;
  }

  private held(name: Invariant) {
    this.report.held[name]++;
  }

  private request(method: string, route: string, body?: unknown) {
    return api(this.url, this.token, method, route, body);
  }

  async run(): Promise<ReliabilityReport> {
    const began = Date.now();
    try {
      await this.setUp();
      await this.checkInvariants('set-up');
      const deadline = this.options.durationMs ? began + this.options.durationMs : Number.POSITIVE_INFINITY;
      const limit = this.options.steps ?? Number.POSITIVE_INFINITY;
      while (this.report.steps < limit && Date.now() < deadline) {
        const step = this.report.steps + 1;
        const { kind, label, mayEnd, act } = this.draw();
        this.log(`step ${step}: ${label}`);
        this.current = `step ${step} (${label})`;
        const stepBegan = Date.now();
        const before = new Map(
          this.hosts.map((host) => [host.id, host.session ? ticks(host.session).length : 0]),
        );
        await within(600_000, `step ${step} (${label})`, act());
        this.report.steps = step;
        if ((OPERATIONS as readonly string[]).includes(kind)) this.report.operations[kind]!++;
        else this.report.faults[kind]!++;
        await this.checkSessions(step, mayEnd, before);
        await this.checkInvariants(`step ${step} (${label})`);
        this.log(`step ${step}: held (${Math.round((Date.now() - stepBegan) / 1000)} s)`);
      }
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.report.failure = `seed ${this.options.seed}, ${this.current}: ${message}`;
      this.log(`FAILED ${this.report.failure}`);
      if (this.gateway?.output) this.log(`gateway output (tail):\n${this.gateway.output.slice(-3000)}`);
    } finally {
      this.report.durationMs = Date.now() - began;
      await this.tearDown();
    }
    return this.report;
  }

  // ---------------------------------------------------------------- set-up and tear-down

  private async setUp() {
    const [, lab] = await Promise.all([buildTestImages(), ensureLab()]);
    this.lab = lab;
    writeFileSync(this.downFile, '[]');
    const made = await labGatewayProcess(
      lab,
      this.work,
      // Health rounds run when the test signals one, never on their own.
      { CCP_TEST_DOWN_EXITS: this.downFile },
      [...HEAP_FLAGS, '--conditions=source', '--import', 'tsx', ENTRY],
    );
    this.gateway = made.gateway;
    this.url = made.url;
    this.sshPort = made.sshPort;
    await this.gateway.start();
    const login = await api(this.url, null, 'POST', '/v1/auth/login', {
      username: 'admin',
      password: ADMIN_PASSWORD,
    });
    this.token = login.body.token;

    for (const [exit, variant] of [
      [0, 'vmess-tcp'],
      [1, 'trojan-tls'],
      [1, 'vless-tcp'],
    ] as const) {
      const lane = lab.exits[exit]!;
      const created = await this.request('POST', '/v1/admin/egress-ips', {
        label: `rel ${exit} ${variant}`,
        ip_address: lane.address,
        proxy_config: lane.variants[variant].proxyConfig,
      });
      if (created.status !== 201) throw new Error(`egress IP: ${JSON.stringify(created.body)}`);
      this.egress.push({ id: created.body.id, exit, variant });
    }
    // Each host has an upstream on each exit: its first binding carries the traffic, the other is standby.
    const plans = [
      [0, 1],
      [1, 0],
      [2, 0],
    ];
    for (const plan of plans) {
      const name = `rel${randomBytes(3).toString('hex')}`;
      const user = await this.request('POST', '/v1/admin/users', {
        username: name,
        password: `${name}-password`,
      });
      if (user.status !== 201) throw new Error(`user: ${JSON.stringify(user.body)}`);
      const host = await this.createHost(
        user.body.id,
        name,
        user.body.ssh_credentials.ssh_pass,
        plan.map((index) => this.egress[index]!.id),
      );
      this.hosts.push(host);
    }
    for (const host of this.hosts) await this.startHost(host);
  }

  private async createHost(userId: string, username: string, sshPass: string, bindings: string[]) {
    const created = await this.request('POST', '/v1/admin/hosts', {
      user_id: userId,
      egress_ip_id: bindings[0],
    });
    if (created.status !== 201) throw new Error(`host: ${JSON.stringify(created.body)}`);
    this.madeHostIds.add(created.body.id);
    for (const egressId of bindings.slice(1)) {
      const bound = await this.request('POST', '/v1/admin/bindings', {
        host_id: created.body.id,
        egress_ip_id: egressId,
      });
      if (bound.status !== 201) throw new Error(`binding: ${JSON.stringify(bound.body)}`);
    }
    return {
      id: created.body.id as string,
      shortId: created.body.short_id as string,
      userId,
      login: `${username}+${created.body.short_id}`,
      sshPass,
      bindings: [...bindings],
      status: 'created' as HostModel['status'],
      session: null,
    };
  }

  /** Ends every session, stops the gateway and removes what the run made; safe to call twice. */
  async tearDown() {
    for (const host of this.hosts) this.endSession(host);
    if (this.gateway) {
      const gateway = this.gateway;
      const force = setTimeout(() => void gateway.kill('SIGKILL'), 15_000);
      await gateway.kill('SIGTERM').catch(() => {});
      clearTimeout(force);
    }
    // Twice: a request the gateway sent the engine just before it went may still make a volume or container.
    for (const pass of [1, 2]) {
      if (pass === 2) await sleep(2_000);
      await removeHostResources(this.madeHostIds).catch(() => {});
    }
    // Homes are loop mounts on immutable mount points: a plain removal of the data directory meets EPERM.
    removeDataDir(this.work);
  }

  // ---------------------------------------------------------------- drawing a step

  private draw(): { kind: StepKind; label: string; mayEnd: Set<string>; act: () => Promise<void> } {
    const running = this.hosts.filter((host) => host.status === 'running');
    const idle = this.hosts.filter((host) => host.status !== 'running');
    const all = new Set(this.hosts.map((host) => host.id));
    const choices: Array<[number, StepKind]> = [
      [idle.length ? 3 : 0, 'start'],
      [running.length ? 2 : 0, 'stop'],
      [1, 'rebuild'],
      [3, 'edit'],
      [3, 'switch'],
      [idle.length ? 1 : 0, 'recreate'],
      [running.length ? 2 : 0, 'failover'],
      [running.length ? 2 : 0, 'kill-v2ray'],
      [1, 'kill-gateway'],
      [
        this.dockerdRestarts < this.options.dockerdRestarts && existsSync('/var/run/docker.pid') ? 1 : 0,
        'restart-dockerd',
      ],
    ];
    const total = choices.reduce((sum, [weight]) => sum + weight, 0);
    let point = this.random() * total;
    let kind: StepKind = 'edit';
    for (const [weight, candidate] of choices) {
      if (point < weight) {
        kind = candidate;
        break;
      }
      point -= weight;
    }
    const possible = new Set(choices.filter(([weight]) => weight > 0).map(([, candidate]) => candidate));
    const first = this.unseen.findIndex((candidate) => possible.has(candidate));
    if (first !== -1) [kind] = this.unseen.splice(first, 1) as [StepKind];
    switch (kind) {
      case 'start': {
        const host = this.pick(idle);
        return { kind, label: `start ${host.shortId}`, mayEnd: new Set(), act: () => this.startHost(host) };
      }
      case 'stop': {
        const host = this.pick(running);
        return {
          kind,
          label: `stop ${host.shortId}`,
          mayEnd: new Set([host.id]),
          act: () => this.stopHost(host),
        };
      }
      case 'rebuild': {
        const host = this.pick(this.hosts);
        return {
          kind,
          label: `rebuild ${host.shortId} (${host.status})`,
          mayEnd: new Set([host.id]),
          act: () => this.rebuildHost(host),
        };
      }
      case 'edit': {
        const egress = this.pick(this.egress);
        const variant = this.pick(EDIT_VARIANTS.filter((name) => name !== egress.variant));
        return {
          kind,
          label: `edit egress ${this.egress.indexOf(egress)} ${egress.variant} -> ${variant}`,
          mayEnd: new Set(),
          act: () => this.editEgress(egress, variant),
        };
      }
      case 'switch': {
        const host = this.pick(this.hosts);
        return {
          kind,
          label: `switch ${host.shortId} (${host.status})`,
          mayEnd: new Set(),
          act: () => this.switchHost(host),
        };
      }
      case 'recreate': {
        const host = this.pick(idle);
        return {
          kind,
          label: `delete ${host.shortId} (${host.status}) and create it again`,
          mayEnd: new Set([host.id]),
          act: () => this.recreateHost(host),
        };
      }
      case 'failover': {
        const exit = Math.floor(this.random() * this.lab.exits.length);
        return {
          kind,
          label: `failover: exit ${exit} down, then up`,
          mayEnd: new Set(),
          act: () => this.failover(exit),
        };
      }
      case 'kill-v2ray': {
        const host = this.pick(running);
        return {
          kind,
          label: `kill v2ray of ${host.shortId}`,
          mayEnd: new Set(),
          act: () => this.killV2ray(host),
        };
      }
      case 'kill-gateway':
        return {
          kind,
          label: 'kill -9 the gateway and start it again',
          mayEnd: all,
          act: () => this.killGateway(),
        };
      case 'restart-dockerd':
        return { kind, label: 'restart dockerd', mayEnd: all, act: () => this.restartDockerd() };
    }
  }

  // ---------------------------------------------------------------- operations

  private async task(route: string): Promise<void> {
    const accepted = await this.request('POST', route);
    if (accepted.status !== 202)
      throw new Error(`POST ${route}: ${accepted.status} ${JSON.stringify(accepted.body)}`);
    const task = await eventually(
      `the task of ${route} to end`,
      async () => {
        const body = (await this.request('GET', `/v1/admin/tasks/${accepted.body.task_id}`)).body;
        return body.status === 'succeeded' || body.status === 'failed' ? body : undefined;
      },
      300_000,
    );
    if (task.status !== 'succeeded')
      throw new InvariantFailed(
        'every task ends',
        `${route} ended ${task.status}: ${JSON.stringify(task.error)}`,
      );
  }

  private async startHost(host: HostModel) {
    await this.task(`/v1/admin/hosts/${host.id}/start`);
    host.status = 'running';
  }

  private async stopHost(host: HostModel) {
    await this.task(`/v1/admin/hosts/${host.id}/stop`);
    host.status = 'stopped';
  }

  private async rebuildHost(host: HostModel) {
    await this.task(`/v1/admin/hosts/${host.id}/rebuild`);
    // A rebuild keeps a running host running and leaves any other one stopped (a never started one created).
    if (host.status === 'failed') host.status = 'stopped';
  }

  private async editEgress(egress: EgressModel, variant: VariantName) {
    const edited = await this.request('PUT', `/v1/admin/egress-ips/${egress.id}`, {
      proxy_config: this.lab.exits[egress.exit]!.variants[variant].proxyConfig,
    });
    if (edited.status !== 200)
      throw new Error(`the edit answered ${edited.status}: ${JSON.stringify(edited.body)}`);
    egress.variant = variant;
  }

  /** The host's active binding goes to the end of its list: the next one carries the traffic. */
  private async switchHost(host: HostModel) {
    const view = (await this.request('GET', `/v1/admin/hosts/${host.id}`)).body;
    const active = view.bindings.find((binding: { active: boolean }) => binding.active);
    if (!active)
      throw new Error(`host ${host.shortId} has no active binding: ${JSON.stringify(view.bindings)}`);
    const removed = await this.request('DELETE', `/v1/admin/bindings/${active.id}`);
    if (removed.status !== 204) throw new Error(`unbind: ${removed.status} ${JSON.stringify(removed.body)}`);
    const bound = await this.request('POST', '/v1/admin/bindings', {
      host_id: host.id,
      egress_ip_id: active.egress_ip_id,
    });
    if (bound.status !== 201) throw new Error(`bind: ${bound.status} ${JSON.stringify(bound.body)}`);
    host.bindings = [...host.bindings.filter((id) => id !== active.egress_ip_id), active.egress_ip_id];
  }

  private async recreateHost(host: HostModel) {
    const removed = await this.request('DELETE', `/v1/admin/hosts/${host.id}`);
    if (removed.status !== 204) throw new Error(`delete: ${removed.status} ${JSON.stringify(removed.body)}`);
    this.endSession(host);
    const username = host.login.split('+')[0]!;
    const again = await this.createHost(host.userId, username, host.sshPass, host.bindings);
    this.hosts[this.hosts.indexOf(host)] = again;
  }

  private async healthRound() {
    const count = () => this.gateway.output.split(HEALTH_ROUND_DONE).length;
    const before = count();
    this.gateway.child!.kill('SIGUSR2');
    await eventually('the health round to end', async () => count() > before, 180_000);
  }

  private async failover(exit: number) {
    this.down.add(exit);
    writeFileSync(this.downFile, JSON.stringify([this.lab.exits[exit]!.address]));
    await this.healthRound();
    // Mid-way: sessions live on, every running host left its failed exit for its standby.
    await this.checkInvariants(`failover (exit ${exit} down)`);
    this.down.delete(exit);
    writeFileSync(this.downFile, '[]');
    // Egress IPs bound to no running host are not in the round: the operator tests them again.
    const listed = (await this.request('GET', '/v1/admin/egress-ips')).body.egress_ips as Array<{
      id: string;
      last_test: { ok: boolean } | null;
    }>;
    for (const egress of listed.filter((row) => row.last_test && !row.last_test.ok)) {
      // As an operator would: a test that fails on its own (a timeout on a loaded machine) is run again, and
      // the report counts it.
      for (let attempt = 1; ; attempt++) {
        const tested = await this.request('POST', `/v1/admin/egress-ips/${egress.id}/test`);
        if (tested.status === 200 && tested.body.ok) break;
        const why = JSON.stringify(tested.body);
        if (attempt === 3) throw new Error(`testing ${egress.id} again failed 3 times, last: ${why}`);
        this.report.egressRetests++;
        this.log(`  the egress test of ${egress.id} failed on its own (${why.slice(0, 300)}); again`);
      }
    }
    await this.healthRound();
  }

  private async killV2ray(host: HostModel) {
    const killed = await runClient('docker', [
      'exec',
      `ccp-egress-${host.id}`,
      'sh',
      '-c',
      'kill -KILL "$(cat /run/ccp-egress/v2ray.pid)"',
    ]);
    if (killed.code !== 0) throw new Error(`kill v2ray: ${killed.stderr}`);
    // The supervisor brings it back; until then the kill switch blocks the workspace's traffic.
    const expected = this.expectedExit(host);
    await until('the tunnel to come back', async () => (await this.observedExit(host)) === expected, 60_000);
  }

  private async killGateway() {
    await this.gateway.kill('SIGKILL');
    for (const host of this.hosts) this.endSession(host);
    await this.gateway.start();
  }

  private async restartDockerd() {
    this.dockerdRestarts++;
    const daemonPid = Number(readFileSync('/var/run/docker.pid', 'utf8'));
    process.kill(daemonPid, 'SIGTERM');
    await eventually(
      'dockerd to stop',
      async () => {
        try {
          process.kill(daemonPid, 0);
          return false;
        } catch {
          return true;
        }
      },
      120_000,
    );
    for (const host of this.hosts) this.endSession(host);
    await exec('bash', [path.join(REPO_ROOT, 'scripts/docker.sh'), 'ensure']);
    await eventually(
      'the gateway to see Docker again',
      async () => (await api(this.url, null, 'GET', '/healthz')).status === 200,
      120_000,
    );
    await this.settle();
    // A running host comes back running (both containers up) or is reported failed, never silently wrong;
    // the gateway learns what happened from the engine's events, so this may take a moment (bounded).
    const wereRunning = this.hosts.filter((host) => host.status === 'running');
    const began = Date.now();
    let last = '';
    await eventually(
      'every host that ran to come back or be reported failed',
      async () => {
        const states = await Promise.all(
          wereRunning.map(async (host) => {
            const status = (await this.request('GET', `/v1/admin/hosts/${host.id}`)).body.status as string;
            const own = await docker.listContainers({
              all: true,
              filters: { label: [`${HOST_LABEL}=${host.id}`] },
            });
            const up = own.filter((c) => c.State === 'running').length;
            return {
              host,
              status,
              up,
              seen: `${host.shortId} ${status}, ${up}/${own.length} containers running`,
            };
          }),
        );
        last = states.map((state) => state.seen).join('; ');
        return states.every(
          (state) => state.status === 'failed' || (state.status === 'running' && state.up === 2),
        )
          ? states
          : undefined;
      },
      120_000,
    ).then(
      (states) => {
        for (const state of states) if (state.status === 'failed') state.host.status = 'failed';
        this.log(`  after dockerd: ${last} (settled in ${Math.round((Date.now() - began) / 1000)} s)`);
      },
      () => {
        throw new InvariantFailed('database agrees with Docker', `120 s after dockerd came back: ${last}`);
      },
    );
    await this.awaitRelinks(began);
  }

  /**
   * Dockerd gave every workspace a new namespace with no link: the gateway links each again once its egress
   * gateway has its kill switch and v2ray (engine-watcher.ts), so a workspace has no network for a while
   * (fail-closed). Waits for that, bounded; a wrong exit meanwhile fails at once.
   */
  private async awaitRelinks(began: number) {
    const running = this.hosts.filter((host) => host.status === 'running');
    let last = '';
    let wrong = '';
    await eventually(
      'every running workspace to be linked again',
      async () => {
        const seen = await Promise.all(
          running.map(async (host) => [host, await this.observedExit(host)] as const),
        );
        last = seen.map(([host, exit]) => `${host.shortId} ${exit}`).join('; ');
        wrong = seen
          .filter(([host, exit]) => !exit.startsWith('curl failed') && exit !== this.expectedExit(host))
          .map(([host, exit]) => `${host.shortId} left from ${exit}, expected ${this.expectedExit(host)}`)
          .join('; ');
        return wrong !== '' || seen.every(([host, exit]) => exit === this.expectedExit(host));
      },
      90_000,
    ).catch(() => {
      throw new InvariantFailed('exit is the current upstream', `90 s after dockerd came back: ${last}`);
    });
    if (wrong)
      throw new InvariantFailed('exit is the current upstream', `before the links were back: ${wrong}`);
    this.log(`  after dockerd: every workspace linked again (${Math.round((Date.now() - began) / 1000)} s)`);
  }

  // ---------------------------------------------------------------- invariants

  private expectedEgress(host: HostModel): EgressModel {
    const egress = host.bindings.map((id) => this.egress.find((e) => e.id === id)!);
    return egress.find((e) => !this.down.has(e.exit)) ?? egress[0]!;
  }

  private expectedExit(host: HostModel): string {
    return this.lab.exits[this.expectedEgress(host).exit]!.address;
  }

  /** What the lab's IP echo sees when the workspace asks it (through its egress gateway). */
  /** The host's egress gateway as a line: its container's state and restarts, v2ray, its uplink's guard. */
  private async gatewayState(host: HostModel): Promise<string> {
    const name = `ccp-egress-${host.id}`;
    const inspected = await runClient('docker', [
      'inspect',
      '-f',
      '{{.State.Status}} restarts={{.RestartCount}} started={{.State.StartedAt}}',
      name,
    ]);
    const v2ray = await runClient('docker', [
      'exec',
      name,
      'sh',
      '-c',
      'kill -0 "$(cat /run/ccp-egress/v2ray.pid)" && echo up || echo down',
    ]);
    const guard = await runClient('nft', ['list', 'table', 'netdev', `ccp_uplink_${host.id}`]);
    return [
      inspected.stdout.trim() || inspected.stderr.trim(),
      `v2ray ${v2ray.stdout.trim() || v2ray.stderr.trim()}`,
      `guard ${guard.code === 0 ? 'loaded' : 'missing'}`,
    ].join(', ');
  }

  private async observedExit(host: HostModel): Promise<string> {
    const result = await runClient(
      'docker',
      ['exec', `ccp-ws-${host.id}`, 'curl', '-sS', '--max-time', '10', `${this.lab.internet.httpUrl}/ip`],
      { timeoutMs: 20_000 },
    );
    return result.code === 0 ? result.stdout.trim() : `curl failed: ${result.stderr.trim()}`;
  }

  /** Waits (bounded) until no task runs and no host is in a transitional state. */
  private async settle() {
    await eventually(
      'every task to end',
      async () => {
        for (const status of ['pending', 'running']) {
          const tasks = (await this.request('GET', `/v1/admin/tasks?status=${status}`)).body.tasks;
          if (tasks.length) return false;
        }
        return true;
      },
      120_000,
    ).catch(() => {
      throw new InvariantFailed('every task ends', 'tasks still pending or running after 120 s');
    });
    this.held('every task ends');
    const transitional = ['starting', 'stopping', 'rebuilding'];
    await eventually(
      'no host in a transitional state',
      async () => {
        const listed = (await this.request('GET', '/v1/admin/hosts')).body.hosts as Array<{ status: string }>;
        return listed.every((host) => !transitional.includes(host.status));
      },
      30_000,
    ).catch(async () => {
      const listed = (await this.request('GET', '/v1/admin/hosts')).body.hosts as Array<{
        short_id: string;
        status: string;
      }>;
      throw new InvariantFailed(
        'no transitional state',
        listed.map((host) => `${host.short_id} ${host.status}`).join(', '),
      );
    });
    this.held('no transitional state');
  }

  private async checkInvariants(where: string) {
    const fail = (name: Invariant, detail: string): never => {
      throw new InvariantFailed(name, `${where}: ${detail}`);
    };
    await this.settle();

    const listed = (await this.request('GET', '/v1/admin/hosts')).body.hosts as Array<{
      id: string;
      status: string;
      bindings: Array<{ egress_ip_id: string; active: boolean }>;
    }>;
    const byId = new Map(listed.map((host) => [host.id, host]));
    for (const host of this.hosts) {
      const seen = byId.get(host.id);
      if (!seen) fail('status is the expected one', `${host.shortId} is not listed`);
      if (seen!.status !== host.status)
        fail('status is the expected one', `${host.shortId} is ${seen!.status}, expected ${host.status}`);
      if (host.status === 'running') {
        const active = seen!.bindings.find((binding) => binding.active)?.egress_ip_id;
        const expected = this.expectedEgress(host).id;
        if (active !== expected)
          fail(
            'active binding is the expected one',
            `${host.shortId} is active on ${active}, expected ${expected}`,
          );
      }
    }
    this.held('status is the expected one');
    this.held('active binding is the expected one');

    // The database agrees with Docker; nothing is left of a host the API no longer lists.
    const listedIds = new Set(listed.map((host) => host.id));
    const { settingUp, orphans } = await this.compareWithDocker(where, listedIds);
    if (settingUp.length) this.log(`  waited for the set-up at creation: ${settingUp.join(', ')}`);
    if (orphans.length)
      this.log(`  waited for the removal of what a set-up made for a deleted host: ${orphans.join(', ')}`);
    this.held('database agrees with Docker');
    this.held('no orphan container or volume');

    // Each running workspace leaves through its current upstream, and nothing but exits reaches the internet.
    const running = this.hosts.filter((host) => host.status === 'running');
    const exits = new Set(this.lab.exits.flatMap((exit) => [exit.address, exit.address6]));
    for (let window = 1; ; window++) {
      await resetSourceCountersWhenQuiet(8_000);
      for (const host of running) {
        let seen = await this.observedExit(host);
        // A request that timed out is asked once more, with what its egress gateway looked like: a broken path
        // times out twice, a leak never shows as a timeout.
        if (seen.startsWith('curl failed') && /timed out/.test(seen)) {
          this.report.exitRetries++;
          this.log(`  ${host.shortId}: ${seen}; gateway: ${await this.gatewayState(host)}; again`);
          seen = await this.observedExit(host);
        }
        const expected = this.expectedExit(host);
        if (seen !== expected)
          fail('exit is the current upstream', `${host.shortId} left from ${seen}, expected ${expected}`);
      }
      await sleep(1_000);
      const strangers = (await readSourceCounters()).filter(
        (counter) => counter.packets > 0 && !exits.has(counter.address),
      );
      if (strangers.length === 0) break;
      const seen = strangers.map((s) => `${s.address} ${s.packets} pkt`).join(', ');
      // The lab is shared: another test's direct request looks the same. A leak repeats; a passer-by does not.
      if (window >= 3) fail('only exits reach the internet', `${seen} in ${window} windows in a row`);
      this.report.counterRetries++;
      this.log(`  counter window ${window}: ${seen} reached the internet; looking again`);
    }
    this.report.held['exit is the current upstream'] += running.length ? 1 : 0;
    this.held('only exits reach the internet');

    // A running host without a session gets one (its old one ended with the step, or it just started).
    for (const host of running) {
      if (host.session) continue;
      const live = openLiveSession(this.sshPort, host.sshPass, [`${host.login}@127.0.0.1`, LOOP]);
      host.session = { live };
      await until('a new session to print', () => ticks(host.session!).length >= 3, 60_000).catch(() =>
        fail(
          'sessions that should live print',
          `a new session to ${host.shortId} prints nothing: ${live.stderr()}`,
        ),
      );
    }
  }

  /**
   * The hosts' containers against their statuses, and no container or volume of a host the API no longer lists.
   * Two states are passing, not wrong, and are waited for (bounded): a new host's workspace runs once without a
   * network while its creation sets it up (HostTasks.prepareAhead, not a task), and what that set-up made for a
   * host deleted meanwhile is removed once the set-up ends. Anything else fails at once; what was waited for is
   * returned for the log.
   */
  private async compareWithDocker(where: string, listedIds: Set<string>) {
    const waitedFor = { settingUp: new Set<string>(), orphans: new Set<string>() };
    const deadline = Date.now() + SET_UP_BOUND_MS;
    const filters = { label: [HOST_LABEL] };
    const wrong = (detail: string) =>
      new InvariantFailed('database agrees with Docker', `${where}: ${detail}`);
    for (;;) {
      const containers = (await docker.listContainers({ all: true, filters })).filter((c) =>
        this.madeHostIds.has(c.Labels[HOST_LABEL] ?? ''),
      );
      const volumes = ((await docker.listVolumes({ filters })).Volumes ?? []).filter((v) =>
        this.madeHostIds.has(v.Labels?.[HOST_LABEL] ?? ''),
      );
      const settingUp: string[] = [];
      for (const host of this.hosts) {
        const own = containers.filter((c) => c.Labels[HOST_LABEL] === host.id);
        const runningOnes = own.filter((c) => c.State === 'running');
        const names = own.map((c) => `${c.Names.join()} ${c.State}`).join(', ') || 'none';
        if (host.status === 'running' && (own.length !== 2 || runningOnes.length !== 2))
          throw wrong(`${host.shortId} is running; its containers: ${names}`);
        if (host.status === 'running' || runningOnes.length === 0) continue;
        const setUp =
          host.status === 'created' && own.length === 1 && own[0]!.Names.join() === `/ccp-ws-${host.id}`;
        if (!setUp || Date.now() > deadline)
          throw wrong(
            `${host.shortId} is ${host.status}; its containers: ${names}` +
              (setUp ? ` (still, ${SET_UP_BOUND_MS / 1000} s after the check began)` : ''),
          );
        settingUp.push(host.shortId);
      }
      const orphans = [
        ...containers.filter((c) => !listedIds.has(c.Labels[HOST_LABEL]!)).map((c) => c.Names.join()),
        ...volumes.filter((v) => !listedIds.has(v.Labels[HOST_LABEL]!)).map((v) => v.Name),
      ];
      if (orphans.length && Date.now() > deadline)
        throw new InvariantFailed('no orphan container or volume', `${where}: ${orphans.join(', ')}`);
      for (const name of settingUp) waitedFor.settingUp.add(name);
      for (const name of orphans) waitedFor.orphans.add(name);
      if (!settingUp.length && !orphans.length)
        return { settingUp: [...waitedFor.settingUp], orphans: [...waitedFor.orphans] };
      await sleep(500);
    }
  }

  /** Sessions of hosts the step was not allowed to interrupt kept printing the same, unbroken count. */
  private async checkSessions(step: number, mayEnd: Set<string>, before: Map<string, number>) {
    for (const host of this.hosts) {
      if (!host.session) continue;
      if (mayEnd.has(host.id) || host.status !== 'running') {
        this.endSession(host);
        continue;
      }
      const session = host.session;
      const since = before.get(host.id) ?? 0;
      await until('five more ticks', () => ticks(session).length >= since + 5, 30_000).catch(() => {
        throw new InvariantFailed(
          'sessions that should live print',
          `step ${step}: the session to ${host.shortId} stopped printing after tick ${ticks(session).at(-1)} (exit ${session.live.child.exitCode}): ${session.live.stderr().trim()}`,
        );
      });
      const seen = ticks(session);
      const broken = seen.findIndex((value, index) => value !== index + 1);
      if (broken !== -1)
        throw new InvariantFailed(
          'sessions that should live print',
          `step ${step}: the session to ${host.shortId} printed tick ${seen[broken]} where ${broken + 1} was due`,
        );
      this.held('sessions that should live print');
    }
  }

  private endSession(host: HostModel) {
    host.session?.live.child.kill('SIGKILL');
    host.session = null;
  }
}

/** The figures of a run, as lines to print. */
export function describeReport(report: ReliabilityReport): string[] {
  const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);
  const list = (counts: Record<string, number>) =>
    Object.entries(counts)
      .filter(([, count]) => count > 0)
      .map(([kind, count]) => `${kind} ${count}`)
      .join(', ') || 'none';
  return [
    `seed ${report.seed} (replay: RELIABILITY_SEED=${report.seed})`,
    `duration ${(report.durationMs / 1000).toFixed(0)} s, ${report.steps} steps`,
    `operations ${sum(report.operations)}: ${list(report.operations)}`,
    `faults ${sum(report.faults)}: ${list(report.faults)}`,
    'invariants held (times checked without a failure):',
    ...INVARIANTS.map((name) => `  ${name}: ${report.held[name]}`),
    `counter windows repeated for a non-exit source: ${report.counterRetries}`,
    `egress tests run again after failing with the exit up: ${report.egressRetests}`,
    `exit checks run again after timing out: ${report.exitRetries}`,
    report.failure ? `FAILED: ${report.failure}` : 'every invariant held',
  ];
}
