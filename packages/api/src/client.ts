import type Type from 'typebox';
import type { LoginRequest, LoginResponse, Role } from './auth.js';
import type { CliRelease } from './cli.js';
import type { ErrorBody } from './common.js';
import type {
  CreateEgressIpRequest,
  EgressIp,
  EgressIpList,
  EgressTestResult,
  UpdateEgressIpRequest,
} from './egress.js';
import type {
  EgressBudget,
  EgressBudgetList,
  EgressBudgetRequest,
  EgressBudgetScope,
} from './egress-budgets.js';
import type { EgressDecisions, EgressDecisionsQuery } from './egress-decisions.js';
import type { EgressPolicy, HostEgressPolicies, UserEgressPolicies } from './egress-policy.js';
import type { EgressTrafficHours, EgressTrafficQuery, EgressTrafficTotals } from './egress-traffic.js';
import type { EventList, EventQuery, SseMessage, SseTopic } from './events.js';
import type { DashboardStats, Health } from './health.js';
import type {
  Binding,
  BuildImagesRequest,
  CreatedHost,
  CreateHostRequest,
  Host,
  HostList,
  ImageList,
  Task,
  TaskAccepted,
  TaskList,
  TaskQuery,
} from './hosts.js';
import type { ExtendRequest, LifecyclePolicies, LifecyclePolicy } from './lifecycle-policy.js';
import type { NodeList } from './nodes.js';
import type {
  HostResourcesRequest,
  UserResources,
  UserResourcesList,
  UserResourcesRequest,
} from './resources.js';
import type {
  ListeningPortList,
  PortShareCreate,
  PortShareCreated,
  PortShareList,
  PortShareTicket,
  ReceivedPortShareList,
} from './shares.js';
import type {
  AddSshKeyRequest,
  GeneratedSshKey,
  GenerateSshKeyRequest,
  SshKey,
  SshKeyList,
} from './ssh-keys.js';
import type { TerminalSessionList, TerminalTicket, TerminalTicketRequest } from './terminal.js';
import type {
  ChangePasswordRequest,
  CreatedUser,
  CreateUserRequest,
  RotatedPassword,
  SshCredentials,
  User,
  UserList,
  UserStatus,
} from './users.js';
import type { VncStatus, VncTicket } from './vnc.js';

type S<T extends Type.TSchema> = Type.Static<T>;

/** A failed API call: the HTTP status with the gateway's `{error, code, details}` body. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: S<typeof ErrorBody>;

  constructor(status: number, body: S<typeof ErrorBody>) {
    super(body.error);
    this.name = 'ApiError';
    this.status = status;
    this.code = body.code;
    this.body = body;
  }

  /** The message the API gave for one request field (`username`, `proxy_config.server_port`). */
  fieldMessage(field: string): string | undefined {
    return this.body.details?.find((d) => d.field === field)?.message;
  }
}

export interface ApiClientOptions {
  /** Where the gateway answers; empty for the page's own origin. */
  baseUrl?: string;
  /** The bearer token to send, read on every call so a new sign-in takes effect at once. */
  token?: () => string | null;
  /** Told about every 401 of an authenticated call (an expired or revoked token). */
  onUnauthorized?: (error: ApiError) => void;
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | undefined>;

function queryString(query: Query | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== '') params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** Reads the error body of a failed response; a body that is not the API's shape still yields an ApiError. */
async function errorOf(response: Response): Promise<ApiError> {
  let body: unknown = null;
  try {
    body = await response.json();
  } catch {
    // not JSON (a proxy's error page): fall back below
  }
  if (body && typeof body === 'object' && typeof (body as ErrorBody).error === 'string') {
    return new ApiError(response.status, body as ErrorBody);
  }
  return new ApiError(response.status, {
    error: `${response.status} ${response.statusText || 'request failed'}`,
    code: 'http_error',
  });
}

export interface SseSubscription {
  close(): void;
}

export interface SseOptions {
  topics?: SseTopic[];
  onMessage: (message: SseMessage) => void;
  /** Called on every (re)connection: the caller resyncs what it may have missed. */
  onOpen?: () => void;
  /** Called when the stream drops; it reconnects by itself unless the token was refused. */
  onDisconnect?: (error: unknown) => void;
}

/** A typed client for the gateway API, fetch-based so a browser and Node (a CLI) can both use it. */
export function createApiClient(options: ApiClientOptions = {}) {
  const base = (options.baseUrl ?? '').replace(/\/+$/, '');
  // Bound late so a test or polyfill that replaces the global fetch is honoured.
  const doFetch: typeof fetch = options.fetch ?? ((input, init) => fetch(input, init));

  async function call<T>(method: string, path: string, body?: unknown, query?: Query): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    const token = options.token?.() ?? null;
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await doFetch(`${base}${path}${queryString(query)}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401 && token) options.onUnauthorized?.(error);
      throw error;
    }
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  const get = <T>(path: string, query?: Query) => call<T>('GET', path, undefined, query);
  const post = <T>(path: string, body?: unknown) => call<T>('POST', path, body ?? {});
  const del = (path: string) => call<void>('DELETE', path);
  const id = encodeURIComponent;

  /** The live stream of a role, read with fetch so the token travels in a header, not the URL. */
  function subscribe(role: Role, sse: SseOptions): SseSubscription {
    const controller = new AbortController();
    let lastEventId: string | null = null;
    let delay = 500;

    const run = async (): Promise<void> => {
      while (!controller.signal.aborted) {
        try {
          const headers: Record<string, string> = { accept: 'text/event-stream' };
          const token = options.token?.() ?? null;
          if (token) headers.authorization = `Bearer ${token}`;
          if (lastEventId) headers['last-event-id'] = lastEventId;
          const topics = sse.topics?.join(',');
          const response = await doFetch(`${base}/v1/${role}/sse${queryString({ topics })}`, {
            headers,
            signal: controller.signal,
          });
          if (!response.ok || !response.body) {
            const error = await errorOf(response);
            if (response.status === 401 || response.status === 403) {
              if (response.status === 401 && token) options.onUnauthorized?.(error);
              sse.onDisconnect?.(error);
              return;
            }
            throw error;
          }
          delay = 500;
          sse.onOpen?.();
          await readFrames(response.body, (frame) => {
            if (frame.id) lastEventId = frame.id;
            if (frame.data) sse.onMessage(JSON.parse(frame.data) as SseMessage);
          });
          throw new Error('the event stream ended');
        } catch (error) {
          if (controller.signal.aborted) return;
          sse.onDisconnect?.(error);
          await new Promise((resolve) => setTimeout(resolve, delay));
          delay = Math.min(delay * 2, 10_000);
        }
      }
    };
    void run();
    return { close: () => controller.abort() };
  }

  /** A host's desktop: status, start or restart (each answers once the desktop is up), and a one-time link to
   * open it in a browser. */
  const vncOf = (role: Role) => ({
    status: (hostId: string) => get<S<typeof VncStatus>>(`/v1/${role}/hosts/${id(hostId)}/vnc/status`),
    start: (hostId: string) => post<S<typeof VncStatus>>(`/v1/${role}/hosts/${id(hostId)}/vnc/start`),
    restart: (hostId: string) => post<S<typeof VncStatus>>(`/v1/${role}/hosts/${id(hostId)}/vnc/restart`),
    ticket: (hostId: string) => post<S<typeof VncTicket>>(`/v1/${role}/hosts/${id(hostId)}/vnc/ticket`),
  });

  /** A host's browser terminal: its tmux sessions, and a one-time WebSocket address to open one. */
  const terminalOf = (role: Role) => ({
    sessions: (hostId: string) =>
      get<S<typeof TerminalSessionList>>(`/v1/${role}/hosts/${id(hostId)}/terminal/sessions`),
    ticket: (hostId: string, body: S<typeof TerminalTicketRequest> = {}) =>
      post<S<typeof TerminalTicket>>(`/v1/${role}/hosts/${id(hostId)}/terminal/ticket`, body),
  });

  /** A host's listening ports and shared ports, and one-time entries into a share. */
  const sharesOf = (role: Role) => ({
    ports: (hostId: string) => get<S<typeof ListeningPortList>>(`/v1/${role}/hosts/${id(hostId)}/ports`),
    list: (hostId: string) => get<S<typeof PortShareList>>(`/v1/${role}/hosts/${id(hostId)}/shares`),
    create: (hostId: string, body: S<typeof PortShareCreate>) =>
      post<S<typeof PortShareCreated>>(`/v1/${role}/hosts/${id(hostId)}/shares`, body),
    revoke: (hostId: string, shareId: string) => del(`/v1/${role}/hosts/${id(hostId)}/shares/${id(shareId)}`),
    ticket: (shareId: string) => post<S<typeof PortShareTicket>>(`/v1/${role}/shares/${id(shareId)}/ticket`),
  });

  return {
    health: () => get<S<typeof Health>>('/healthz'),
    login: (body: S<typeof LoginRequest>) => post<S<typeof LoginResponse>>('/v1/auth/login', body),
    subscribe,
    admin: {
      users: {
        list: () => get<S<typeof UserList>>('/v1/admin/users'),
        get: (userId: string) => get<S<typeof User>>(`/v1/admin/users/${id(userId)}`),
        create: (body: S<typeof CreateUserRequest>) => post<S<typeof CreatedUser>>('/v1/admin/users', body),
        setStatus: (userId: string, status: S<typeof UserStatus>) =>
          call<S<typeof User>>('PATCH', `/v1/admin/users/${id(userId)}`, { status }),
        setExpiry: (userId: string, expiresAt: string | null) =>
          call<S<typeof User>>('PUT', `/v1/admin/users/${id(userId)}/expiry`, { expires_at: expiresAt }),
        remove: (userId: string) => del(`/v1/admin/users/${id(userId)}`),
        rotatePassword: (userId: string) =>
          post<S<typeof RotatedPassword>>(`/v1/admin/users/${id(userId)}/rotate-password`),
        regenerateCredentials: (userId: string) =>
          post<S<typeof SshCredentials>>(`/v1/admin/users/${id(userId)}/credentials/regenerate`),
        resources: (userId: string) =>
          get<S<typeof UserResources>>(`/v1/admin/users/${id(userId)}/resources`),
        hostPolicy: (userId: string) =>
          get<S<typeof LifecyclePolicy>>(`/v1/admin/users/${id(userId)}/host-policy`),
        egressPolicy: (userId: string) =>
          get<S<typeof UserEgressPolicies>>(`/v1/admin/users/${id(userId)}/egress-policy`),
        setEgressPolicy: (userId: string, body: S<typeof EgressPolicy>) =>
          call<S<typeof UserEgressPolicies>>('PUT', `/v1/admin/users/${id(userId)}/egress-policy`, body),
        removeEgressPolicy: (userId: string) =>
          call<S<typeof UserEgressPolicies>>('DELETE', `/v1/admin/users/${id(userId)}/egress-policy`),
        setHostPolicy: (userId: string, body: S<typeof LifecyclePolicy>) =>
          call<S<typeof LifecyclePolicy>>('PUT', `/v1/admin/users/${id(userId)}/host-policy`, body),
        setResources: (userId: string, body: S<typeof UserResourcesRequest>) =>
          call<S<typeof UserResources>>('PUT', `/v1/admin/users/${id(userId)}/resources`, body),
        keys: {
          list: (userId: string) => get<S<typeof SshKeyList>>(`/v1/admin/users/${id(userId)}/ssh-keys`),
          add: (userId: string, body: S<typeof AddSshKeyRequest>) =>
            post<S<typeof SshKey>>(`/v1/admin/users/${id(userId)}/ssh-keys`, body),
          generate: (userId: string, body: S<typeof GenerateSshKeyRequest> = {}) =>
            post<S<typeof GeneratedSshKey>>(`/v1/admin/users/${id(userId)}/ssh-keys/generate`, body),
          remove: (userId: string, keyId: string) =>
            del(`/v1/admin/users/${id(userId)}/ssh-keys/${id(keyId)}`),
        },
      },
      egressIps: {
        list: () => get<S<typeof EgressIpList>>('/v1/admin/egress-ips'),
        get: (ipId: string) => get<S<typeof EgressIp>>(`/v1/admin/egress-ips/${id(ipId)}`),
        create: (body: S<typeof CreateEgressIpRequest>) =>
          post<S<typeof EgressIp>>('/v1/admin/egress-ips', body),
        update: (ipId: string, body: S<typeof UpdateEgressIpRequest>) =>
          call<S<typeof EgressIp>>('PUT', `/v1/admin/egress-ips/${id(ipId)}`, body),
        remove: (ipId: string) => del(`/v1/admin/egress-ips/${id(ipId)}`),
        test: (ipId: string) => post<S<typeof EgressTestResult>>(`/v1/admin/egress-ips/${id(ipId)}/test`),
      },
      hosts: {
        list: () => get<S<typeof HostList>>('/v1/admin/hosts'),
        get: (hostId: string) => get<S<typeof Host>>(`/v1/admin/hosts/${id(hostId)}`),
        create: (body: S<typeof CreateHostRequest>) => post<S<typeof CreatedHost>>('/v1/admin/hosts', body),
        remove: (hostId: string) => del(`/v1/admin/hosts/${id(hostId)}`),
        start: (hostId: string) => post<S<typeof TaskAccepted>>(`/v1/admin/hosts/${id(hostId)}/start`),
        stop: (hostId: string) => post<S<typeof TaskAccepted>>(`/v1/admin/hosts/${id(hostId)}/stop`),
        rebuild: (hostId: string) => post<S<typeof TaskAccepted>>(`/v1/admin/hosts/${id(hostId)}/rebuild`),
        resize: (hostId: string, body: S<typeof HostResourcesRequest>) =>
          call<S<typeof Host>>('PUT', `/v1/admin/hosts/${id(hostId)}/resources`, body),
        extend: (hostId: string, body: S<typeof ExtendRequest> = {}) =>
          post<S<typeof Host>>(`/v1/admin/hosts/${id(hostId)}/extend`, body),
        egressPolicy: (hostId: string) =>
          get<S<typeof HostEgressPolicies>>(`/v1/admin/hosts/${id(hostId)}/egress-policy`),
        setEgressPolicy: (hostId: string, body: S<typeof EgressPolicy>) =>
          call<S<typeof HostEgressPolicies>>('PUT', `/v1/admin/hosts/${id(hostId)}/egress-policy`, body),
        removeEgressPolicy: (hostId: string) =>
          call<S<typeof HostEgressPolicies>>('DELETE', `/v1/admin/hosts/${id(hostId)}/egress-policy`),
        lifecyclePolicy: (hostId: string) =>
          get<S<typeof LifecyclePolicies>>(`/v1/admin/hosts/${id(hostId)}/lifecycle-policy`),
        setLifecyclePolicy: (hostId: string, body: S<typeof LifecyclePolicy>) =>
          call<S<typeof LifecyclePolicies>>('PUT', `/v1/admin/hosts/${id(hostId)}/lifecycle-policy`, body),
        vnc: vncOf('admin'),
        terminal: terminalOf('admin'),
        shares: sharesOf('admin'),
      },
      bindings: {
        create: (hostId: string, egressIpId: string) =>
          post<S<typeof Binding>>('/v1/admin/bindings', { host_id: hostId, egress_ip_id: egressIpId }),
        remove: (bindingId: string) => del(`/v1/admin/bindings/${id(bindingId)}`),
      },
      tasks: {
        list: (query: S<typeof TaskQuery> = {}) => get<S<typeof TaskList>>('/v1/admin/tasks', query),
        get: (taskId: string) => get<S<typeof Task>>(`/v1/admin/tasks/${id(taskId)}`),
      },
      events: (query: S<typeof EventQuery> = {}) => get<S<typeof EventList>>('/v1/admin/events', query),
      stats: () => get<S<typeof DashboardStats>>('/v1/admin/dashboard/stats'),
      egressTraffic: {
        totals: (query: S<typeof EgressTrafficQuery> = {}) =>
          get<S<typeof EgressTrafficTotals>>('/v1/admin/egress-traffic', query),
        hours: (query: S<typeof EgressTrafficQuery> = {}) =>
          get<S<typeof EgressTrafficHours>>('/v1/admin/egress-traffic/hours', query),
      },
      egressBudgets: {
        list: () => get<S<typeof EgressBudgetList>>('/v1/admin/egress-budgets'),
        get: (scope: S<typeof EgressBudgetScope>, subjectId: string) =>
          get<S<typeof EgressBudget>>(`/v1/admin/egress-budgets/${scope}/${id(subjectId)}`),
        set: (scope: S<typeof EgressBudgetScope>, subjectId: string, body: S<typeof EgressBudgetRequest>) =>
          call<S<typeof EgressBudget>>('PUT', `/v1/admin/egress-budgets/${scope}/${id(subjectId)}`, body),
        remove: (scope: S<typeof EgressBudgetScope>, subjectId: string) =>
          del(`/v1/admin/egress-budgets/${scope}/${id(subjectId)}`),
      },
      egressDecisions: (hostId: string, query: S<typeof EgressDecisionsQuery> = {}) =>
        get<S<typeof EgressDecisions>>(`/v1/admin/hosts/${id(hostId)}/egress-decisions`, query),
      nodes: () => get<S<typeof NodeList>>('/v1/admin/nodes'),
      quotas: () => get<S<typeof UserResourcesList>>('/v1/admin/quotas'),
      removeNode: (name: string) => del(`/v1/admin/nodes/${id(name)}`),
      images: () => get<S<typeof ImageList>>('/v1/admin/images'),
      cli: () => get<S<typeof CliRelease>>('/v1/admin/cli'),
      buildImages: (body: S<typeof BuildImagesRequest> = {}) =>
        post<S<typeof TaskAccepted>>('/v1/admin/images/build', body),
    },
    user: {
      cli: () => get<S<typeof CliRelease>>('/v1/user/cli'),
      resources: () => get<S<typeof UserResources>>('/v1/user/resources'),
      changePassword: (body: S<typeof ChangePasswordRequest>) =>
        post<unknown>('/v1/user/change-password', body),
      keys: {
        list: () => get<S<typeof SshKeyList>>('/v1/user/ssh-keys'),
        add: (body: S<typeof AddSshKeyRequest>) => post<S<typeof SshKey>>('/v1/user/ssh-keys', body),
        generate: (body: S<typeof GenerateSshKeyRequest> = {}) =>
          post<S<typeof GeneratedSshKey>>('/v1/user/ssh-keys/generate', body),
        remove: (keyId: string) => del(`/v1/user/ssh-keys/${id(keyId)}`),
      },
      hosts: {
        list: () => get<S<typeof HostList>>('/v1/user/hosts'),
        get: (hostId: string) => get<S<typeof Host>>(`/v1/user/hosts/${id(hostId)}`),
        start: (hostId: string) => post<S<typeof TaskAccepted>>(`/v1/user/hosts/${id(hostId)}/start`),
        stop: (hostId: string) => post<S<typeof TaskAccepted>>(`/v1/user/hosts/${id(hostId)}/stop`),
        rebuild: (hostId: string) => post<S<typeof TaskAccepted>>(`/v1/user/hosts/${id(hostId)}/rebuild`),
        extend: (hostId: string, body: S<typeof ExtendRequest> = {}) =>
          post<S<typeof Host>>(`/v1/user/hosts/${id(hostId)}/extend`, body),
        vnc: vncOf('user'),
        terminal: terminalOf('user'),
        shares: sharesOf('user'),
      },
      /** Shares of other users' hosts shared with the caller by username (opened with hosts.shares.ticket). */
      sharedWithMe: () => get<S<typeof ReceivedPortShareList>>('/v1/user/shares/shared-with-me'),
      tasks: {
        get: (taskId: string) => get<S<typeof Task>>(`/v1/user/tasks/${id(taskId)}`),
      },
      egressTraffic: (query: S<typeof EgressTrafficQuery> = {}) =>
        get<S<typeof EgressTrafficTotals>>('/v1/user/egress-traffic', query),
      egressTrafficHours: (query: S<typeof EgressTrafficQuery> = {}) =>
        get<S<typeof EgressTrafficHours>>('/v1/user/egress-traffic/hours', query),
      egressDecisions: (hostId: string, query: S<typeof EgressDecisionsQuery> = {}) =>
        get<S<typeof EgressDecisions>>(`/v1/user/hosts/${id(hostId)}/egress-decisions`, query),
    },
  };
}

export type ApiClient = ReturnType<typeof createApiClient>;

interface Frame {
  id: string | null;
  data: string;
}

/** Splits a text/event-stream body into frames (comments such as heartbeats are skipped). */
async function readFrames(body: ReadableStream<Uint8Array>, onFrame: (frame: Frame) => void): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let frameId: string | null = null;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('id:')) frameId = line.slice(3).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (frameId !== null || data.length > 0) onFrame({ id: frameId, data: data.join('\n') });
      end = buffer.indexOf('\n\n');
    }
  }
}
