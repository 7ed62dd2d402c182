import http from 'node:http';
import type { Socket } from 'node:net';
import type { VncStatus } from '@ccp/api';
import type { Logger } from 'pino';
import { type HostDialer, HostUnreachable } from '../cluster/host-dialer.js';
import type { HostGrant } from '../domain/access/grants.js';
import { grantedHostAccess, type HostAccess } from '../domain/access/host-access.js';
import { DomainError, errors } from '../domain/errors.js';
import type { EventBus } from '../events/event-bus.js';
import { DESKTOP_CONTROL, DESKTOP_CONTROL_TIMEOUT_MS } from '../runtime/container-specs.js';
import { type ExecResult, RuntimeError } from '../runtime/workspace-runtime.js';

const ACTIONS = ['status', 'start', 'restart'];

/** Whether `command` is one of the desktop's controls: the only commands a node runs for its peers. */
export function isDesktopControl(command: string[]): boolean {
  return command.length === 2 && command[0] === DESKTOP_CONTROL && ACTIONS.includes(command[1]!);
}
const STATUS_TIMEOUT_MS = 10_000;
/** After the program reports the desktop up, how long the gateway's own path to it may take to answer. */
const REACH_TIMEOUT_MS = 5_000;

/** What `ccp-desktop status|start|restart` prints: one line of JSON. */
interface ControlReport {
  status: 'running' | 'starting' | 'stopped' | 'unavailable';
  auto_restart_limited: boolean;
  display: string;
  websocket_port: number;
  error: string;
}

export interface DesktopControlOptions {
  /** Runs the control program and reaches the desktop, on this node or through the host's node. */
  dialer: HostDialer;
  bus: EventBus;
  log: Logger;
}

/**
 * Status, start and restart of a host's desktop, through the control program in its workspace container
 * (no rebuild). Start and restart answer once the desktop is really up: the program waits for the display's
 * RFB banner and websockify's listening socket, then the gateway fetches the web client through its own path.
 */
export class DesktopControl {
  constructor(private readonly options: DesktopControlOptions) {}

  /** The desktop's state, for whoever may use it (Access.requireHost with `desktop`). */
  async status(grant: HostGrant): Promise<VncStatus> {
    const host = grantedHostAccess(grant, 'desktop');
    if (host.status !== 'running') return hostStopped();
    const report = await this.run(host, 'status', STATUS_TIMEOUT_MS);
    return report ? statusOf(report.report) : unavailable();
  }

  /** Starts or restarts the desktop; answers once it is up. */
  async control(grant: HostGrant, action: 'start' | 'restart'): Promise<VncStatus> {
    const host = grantedHostAccess(grant, 'desktop');
    if (host.status !== 'running') throw hostNotRunning();
    const began = Date.now();
    const event = {
      actor: grant.actor,
      userId: host.ownerId,
      hostId: host.id,
    };
    const fail = async (error: DomainError): Promise<never> => {
      await this.options.bus.emit({
        ...event,
        type: `vnc.${action}.failed`,
        level: 'error',
        message: `Desktop ${action} on host ${host.shortId} failed: ${error.message}`,
        data: { short_id: host.shortId, code: error.code, reason: error.message },
      });
      throw error;
    };
    const outcome = await this.run(host, action, DESKTOP_CONTROL_TIMEOUT_MS).catch((error: unknown) => {
      if (error instanceof DomainError) return fail(error);
      throw error;
    });
    if (!outcome) return fail(desktopUnavailable());
    if (outcome.exitCode !== 0) {
      const reason = outcome.stderr.trim().split('\n')[0] || outcome.report.error || 'unknown reason';
      return fail(errors.unavailable('vnc_start_failed', `The desktop did not start: ${reason}`));
    }
    const reachError = await this.reach(host);
    if (reachError) {
      return fail(
        errors.unavailable(
          'vnc_unreachable',
          `The desktop runs but the gateway cannot reach it: ${reachError}`,
        ),
      );
    }
    await this.options.bus.emit({
      ...event,
      type: action === 'start' ? 'vnc.started' : 'vnc.restarted',
      message: `Desktop on host ${host.shortId} ${action === 'start' ? 'started' : 'restarted'}`,
      data: { short_id: host.shortId, duration_ms: Date.now() - began },
    });
    return statusOf(outcome.report);
  }

  /** Runs the control program; null when the workspace or the program is not there. */
  private async run(
    host: HostAccess,
    action: 'status' | 'start' | 'restart',
    timeoutMs: number,
  ): Promise<{ exitCode: number; stderr: string; report: ControlReport } | null> {
    let result: ExecResult | null;
    try {
      result = await this.options.dialer.exec(host, [DESKTOP_CONTROL, action], timeoutMs);
    } catch (error) {
      if (error instanceof HostUnreachable) throw errors.unavailable('vnc_unreachable', error.message);
      if (error instanceof RuntimeError && error.code === 'exec_timeout')
        throw errors.unavailable('vnc_timeout', error.message);
      if (error instanceof RuntimeError)
        throw errors.unavailable('runtime_unavailable', `The container engine failed: ${error.message}`);
      throw error;
    }
    if (!result) return null;
    const report = parseReport(result.stdout);
    if (!report) {
      // 126/127: an image without the desktop (made before it existed).
      this.options.log.warn(
        { host_id: host.id, exit_code: result.exitCode, stderr: result.stderr.slice(0, 500) },
        'the desktop control program gave no status',
      );
      return null;
    }
    return { exitCode: result.exitCode, stderr: result.stderr, report };
  }

  /** Fetches the web client through the relay, as the proxy will; returns why not, or null when it answered. */
  private async reach(host: HostAccess): Promise<string | null> {
    const until = Date.now() + REACH_TIMEOUT_MS;
    let last = 'no answer';
    while (Date.now() < until) {
      let socket: Socket;
      try {
        socket = await this.options.dialer.open(host, 'desktop');
      } catch (error) {
        if (!(error instanceof HostUnreachable)) throw error;
        if (error.reason === 'no_path') return error.message;
        last = error.message;
        await new Promise((resolve) => setTimeout(resolve, 100));
        continue;
      }
      last = await fetchStatus(socket, '/vnc.html').then(
        (status) => (status === 200 ? '' : `HTTP ${status}`),
        (error: NodeJS.ErrnoException) => error.code ?? error.message,
      );
      if (!last) return null;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return last;
  }
}

function parseReport(stdout: string): ControlReport | null {
  const line = stdout.trim().split('\n').pop() ?? '';
  try {
    const value = JSON.parse(line) as Partial<ControlReport>;
    if (
      typeof value.status === 'string' &&
      ['running', 'starting', 'stopped', 'unavailable'].includes(value.status) &&
      typeof value.auto_restart_limited === 'boolean' &&
      typeof value.display === 'string' &&
      typeof value.websocket_port === 'number'
    )
      return { error: '', ...value } as ControlReport;
  } catch {
    // not JSON: reported as no status
  }
  return null;
}

function statusOf(report: ControlReport): VncStatus {
  if (report.status === 'unavailable') return unavailable();
  return {
    status: report.status,
    running: report.status === 'running',
    can_start: report.status === 'stopped',
    can_restart: true,
    auto_restart_limited: report.auto_restart_limited,
    display: report.display,
    websocket_port: report.websocket_port,
  };
}

const hostStopped = (): VncStatus => ({
  status: 'host_stopped',
  running: false,
  can_start: false,
  can_restart: false,
  auto_restart_limited: false,
  display: null,
  websocket_port: null,
});

const unavailable = (): VncStatus => ({ ...hostStopped(), status: 'unavailable' });

const hostNotRunning = () =>
  errors.conflict('host_not_running', 'The host is not running; start it before its desktop');

const desktopUnavailable = () =>
  errors.unavailable(
    'vnc_unavailable',
    "The host's workspace has no desktop to control (rebuild it from the current image)",
  );

/** One GET over an open connection; the connection ends with it. */
function fetchStatus(socket: Socket, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        path,
        method: 'GET',
        timeout: 1000,
        createConnection: () => socket,
        headers: { connection: 'close' },
      },
      (response) => {
        response.resume();
        response.once('end', () => socket.destroy());
        resolve(response.statusCode ?? 0);
      },
    );
    request.on('timeout', () => request.destroy(new Error('timeout')));
    request.on('error', (error) => {
      socket.destroy();
      reject(error);
    });
    request.end();
  });
}
