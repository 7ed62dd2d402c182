import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import { hostOfContainer, OWNER_LABEL, ROLE_LABEL } from './container-specs.js';
import { delay } from './readiness.js';
import type { RuntimeNotice } from './workspace-runtime.js';

export const HOST_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

export interface EngineWatcherOptions {
  docker: Docker;
  /** This gateway's OWNER_LABEL value: only its own containers are watched. */
  owner: string;
  /** Links a host's workspace to its egress gateway again if a (re)start left it unlinked. */
  relink: (hostId: string) => Promise<void>;
  /** Every host this gateway has containers or volumes of. */
  hostIds: () => Promise<string[]>;
}

/**
 * Follows the engine for what happens to a host's containers without the gateway's involvement: a container
 * (re)started by the restart policy or a daemon restart has a new namespace with no link until one is made,
 * and the egress gateway's supervisor says in its log when v2ray died and was restarted. Catches up on every
 * host when it (re)subscribes.
 */
export class EngineWatcher {
  constructor(private readonly options: EngineWatcherOptions) {}

  /** Starts watching; returns the function that stops. */
  watch(
    onError: (error: unknown) => void = () => {},
    onNotice: (notice: RuntimeNotice) => void = () => {},
  ): () => void {
    const { docker, owner, relink, hostIds } = this.options;
    // The events stream is idle for long stretches: it needs a client without the API timeout.
    const events = new Docker({
      socketPath: (docker.modem as unknown as { socketPath: string }).socketPath,
    });
    let stopped = false;
    let stream: NodeJS.ReadableStream | null = null;
    const followed = new Set<string>();
    const logStreams = new Set<NodeJS.ReadableStream>();
    const follow = (containerId: string, hostId: string) => {
      if (stopped || followed.has(containerId)) return;
      followed.add(containerId);
      this.followSupervisor(events, containerId, hostId, onNotice)
        .then((logs) => {
          logStreams.add(logs);
          const forget = () => {
            followed.delete(containerId);
            logStreams.delete(logs);
          };
          logs.on('close', forget);
          logs.on('end', forget);
          logs.on('error', forget);
          if (stopped) (logs as { destroy?: () => void }).destroy?.();
        })
        .catch((error: unknown) => {
          followed.delete(containerId);
          onError(error);
        });
    };
    const loop = async () => {
      while (!stopped) {
        try {
          stream = await events.getEvents({
            filters: {
              type: ['container'],
              event: ['start'],
              // Not only those with a host label: a gateway a host took from the pool is the host's by its name.
              label: [`${OWNER_LABEL}=${owner}`],
            },
          });
          // Read from now on, beside the catch-up below: a stream the engine cuts meanwhile ends this round. Read
          // only after it, the stream's end had gone by unheard and the watcher waited for it for good.
          const reading = readEvents(stream, (event) => {
            const attributes = event.Actor?.Attributes ?? {};
            const hostId = hostOfContainer(attributes, attributes.name);
            if (!hostId || !HOST_ID.test(hostId)) return;
            relink(hostId).catch(onError);
            if (attributes[ROLE_LABEL] === 'egress-gateway' && event.Actor?.ID)
              follow(event.Actor.ID, hostId);
          });
          // Its failure is awaited below, after the catch-up.
          reading.catch(() => {});
          try {
            for (const hostId of await hostIds()) relink(hostId).catch(onError);
            const gateways = await docker.listContainers({
              filters: { label: [`${OWNER_LABEL}=${owner}`, `${ROLE_LABEL}=egress-gateway`] },
            });
            for (const gateway of gateways) {
              const hostId = hostOfContainer(gateway.Labels, gateway.Names[0]);
              if (hostId && HOST_ID.test(hostId)) follow(gateway.Id, hostId);
            }
          } catch (error) {
            (stream as { destroy?: () => void }).destroy?.();
            throw error;
          }
          await reading;
        } catch (error) {
          if (!stopped) onError(error);
        }
        if (!stopped) await delay(1000);
      }
    };
    void loop();
    return () => {
      stopped = true;
      (stream as { destroy?: () => void } | null)?.destroy?.();
      for (const logs of logStreams) (logs as { destroy?: () => void }).destroy?.();
    };
  }

  /** Follows an egress gateway's log from now on and reports its supervisor's restarts of v2ray. */
  private async followSupervisor(
    client: Docker,
    containerId: string,
    hostId: string,
    onNotice: (notice: RuntimeNotice) => void,
  ): Promise<NodeJS.ReadableStream> {
    const logs = (await client.getContainer(containerId).logs({
      follow: true,
      stdout: true,
      stderr: true,
      since: Math.floor(Date.now() / 1000),
    })) as NodeJS.ReadableStream;
    let pending = '';
    const lines = new PassThrough();
    lines.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const complete = pending.split('\n');
      pending = complete.pop() ?? '';
      for (const line of complete) {
        const restart = /v2ray exited with status .*restarting in .*$/.exec(line);
        if (restart) onNotice({ hostId, kind: 'egress_restarted', message: restart[0] });
      }
    });
    this.options.docker.modem.demuxStream(logs, lines, lines);
    logs.on('end', () => lines.end());
    return logs;
  }
}

interface DockerEvent {
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

function readEvents(stream: NodeJS.ReadableStream, onEvent: (event: DockerEvent) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    if ((stream as { destroyed?: boolean }).destroyed) return resolve();
    let pending = '';
    stream.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) onEvent(JSON.parse(line) as DockerEvent);
    });
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
}
