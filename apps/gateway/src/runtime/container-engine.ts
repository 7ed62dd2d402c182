import Docker from 'dockerode';

/** The container engine as the rest of the gateway sees it. Workspaces build on this in the runtime driver. */
export interface ContainerEngine {
  /** Resolves when the engine answers; rejects with a readable reason otherwise. */
  ping(timeoutMs?: number): Promise<void>;
}

/**
 * How long a request to the engine may stay silent before the gateway drops it ("socket hang up"). Creating,
 * starting and stopping containers answer only when done, and six starts at once on a busy two-core machine took
 * a request past 10 s (the start failed while the engine went on with it); a minute still tells a wedged engine.
 */
export const ENGINE_REQUEST_TIMEOUT_MS = 60_000;

export class DockerEngine implements ContainerEngine {
  readonly docker: Docker;

  constructor(socketPath: string) {
    this.docker = new Docker({ socketPath, timeout: ENGINE_REQUEST_TIMEOUT_MS });
  }

  async ping(timeoutMs = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.docker.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('container engine did not answer in time')), timeoutMs);
        }),
      ]);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ECONNREFUSED') throw new Error('container engine is not running');
      throw error instanceof Error ? error : new Error(String(error));
    } finally {
      clearTimeout(timer);
    }
  }
}
