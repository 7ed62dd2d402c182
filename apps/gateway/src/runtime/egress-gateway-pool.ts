import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readlink, rename, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import type { EgressGatewayFiles } from './egress-gateway-files.js';

/** One egress gateway started ahead: running, its kill switch and v2ray ready, its uplink port guarded. */
export interface PooledGateway {
  /** `pool-<hex>`: its container is pooledGatewayName(id), its guard table and directory are named by it. */
  id: string;
  containerId: string;
  /** Its init's PID when it became ready: another one means dockerd restarted it (unguarded since). */
  pid: number;
  egressIpId: string;
  filesKey: string;
  /** Its files, bound into it; a host that takes it moves them to its own directory. */
  dir: string;
}

export interface EgressGatewayPoolOptions {
  /** DATA_DIR/runtime/egress-pool: the pooled gateways' files. */
  dir: string;
  /** Gateways kept ahead per upstream (EGRESS_GATEWAY_POOL); 0 turns the pool off. */
  perUpstream: number;
  /** Gateways kept ahead in all (EGRESS_GATEWAY_POOL_MAX). */
  max: number;
}

/**
 * What a pooled gateway is keyed by: its files (config with the upstream's secrets, ruleset, uplink policy) and
 * image. A start takes one only when its own would be exactly the same, so a changed upstream, server address,
 * DNS or policy never gets an old gateway.
 */
export function gatewayFilesKey(files: EgressGatewayFiles, image: string): string {
  return createHash('sha256')
    .update(JSON.stringify([image, files.v2ray, files.ruleset, files.uplink]))
    .digest('hex')
    .slice(0, 32);
}

/**
 * The bookkeeping of the egress gateways started ahead per upstream (issue 28): which are ready, how many are on
 * their way, and their files on disk. Each is taken by one host and never comes back: a host's gateway is made
 * anew at its next start, so nothing one host did (connections, DNS cache, counters) reaches another.
 */
export class EgressGatewayPool {
  private readonly ready: PooledGateway[] = [];
  /** Gateways being started, by files key. */
  private readonly starting = new Map<string, number>();
  /** Bumped when an upstream's gateways are retired (`epoch`: all of them): a start under way then is not kept. */
  private readonly generations = new Map<string, number>();
  private epoch = 0;

  constructor(private readonly options: EgressGatewayPoolOptions) {}

  get enabled(): boolean {
    return this.options.perUpstream > 0 && this.options.max > 0;
  }

  /** A ready gateway with these files, taken out of the pool (null when none is). */
  take(filesKey: string): PooledGateway | null {
    const index = this.ready.findIndex((entry) => entry.filesKey === filesKey);
    return index >= 0 ? this.ready.splice(index, 1)[0]! : null;
  }

  /** Takes out the ready gateways of this upstream made with other files (what it was before), to remove. */
  stale(egressIpId: string, filesKey: string): PooledGateway[] {
    return this.removeWhere((entry) => entry.egressIpId === egressIpId && entry.filesKey !== filesKey);
  }

  /** How many more gateways with these files to start now (none past the pool's total). */
  wanted(filesKey: string): number {
    if (!this.enabled) return 0;
    const have = this.ready.filter((entry) => entry.filesKey === filesKey).length;
    const coming = this.starting.get(filesKey) ?? 0;
    const total = this.ready.length + [...this.starting.values()].reduce((a, b) => a + b, 0);
    return Math.max(0, Math.min(this.options.perUpstream - have - coming, this.options.max - total));
  }

  /** A new entry's name and directory, counted as starting until `settle`. */
  begin(
    egressIpId: string,
    filesKey: string,
  ): { entry: Omit<PooledGateway, 'containerId' | 'pid'>; generation: string } {
    this.starting.set(filesKey, (this.starting.get(filesKey) ?? 0) + 1);
    const id = `pool-${randomBytes(6).toString('hex')}`;
    return {
      entry: { id, egressIpId, filesKey, dir: path.join(this.options.dir, id) },
      generation: this.generationOf(egressIpId),
    };
  }

  /** Ends a start: a ready gateway joins the pool unless its upstream was retired meanwhile (then false). */
  settle(filesKey: string, generation: string, ready: PooledGateway | null): boolean {
    this.starting.set(filesKey, (this.starting.get(filesKey) ?? 1) - 1);
    if (!ready || this.generationOf(ready.egressIpId) !== generation) return false;
    this.ready.push(ready);
    return true;
  }

  /** Takes out the ready gateways of one upstream (all without one), for the caller to remove. */
  retire(egressIpId?: string): PooledGateway[] {
    if (egressIpId) this.generations.set(egressIpId, (this.generations.get(egressIpId) ?? 0) + 1);
    else this.epoch++;
    return this.removeWhere((entry) => egressIpId === undefined || entry.egressIpId === egressIpId);
  }

  /**
   * Hands a taken gateway's files to its host: the directory becomes the host's (`hostDir`, whose old files go),
   * and its pool path becomes a link to it, as the container's bind names that path when dockerd starts it again.
   */
  async handOver(entry: PooledGateway, hostDir: string): Promise<void> {
    await rm(hostDir, { recursive: true, force: true });
    await mkdir(path.dirname(hostDir), { recursive: true, mode: 0o700 });
    await rename(entry.dir, hostDir);
    await symlink(hostDir, entry.dir);
  }

  /** Removes a gateway's pool path: its files, or the link a host's directory left there. */
  async forget(dir: string): Promise<void> {
    if (path.dirname(dir) === this.options.dir) await rm(dir, { recursive: true, force: true });
  }

  /**
   * Removes the link a host's directory left in the pool when its gateway was taken from it: the host is gone,
   * whatever its gateway's container still said of its bind (a removed host leaves no link behind).
   */
  async forgetLinksTo(hostDir: string): Promise<void> {
    const names = await readdir(this.options.dir).catch(() => [] as string[]);
    for (const name of names) {
      const dir = path.join(this.options.dir, name);
      if ((await readlink(dir).catch(() => null)) === hostDir) await rm(dir, { force: true });
    }
  }

  /**
   * Removes what no container binds in the pool's directory (`inUse`: the pool paths bound by containers that
   * still exist): files of gateways never taken, links of taken ones since removed. A link goes, not its target.
   */
  async sweep(inUse: Set<string>): Promise<void> {
    const names = await readdir(this.options.dir).catch(() => [] as string[]);
    for (const name of names) {
      const dir = path.join(this.options.dir, name);
      if (!inUse.has(dir)) await rm(dir, { recursive: true, force: true });
    }
  }

  private generationOf(egressIpId: string): string {
    return `${this.epoch}.${this.generations.get(egressIpId) ?? 0}`;
  }

  private removeWhere(test: (entry: PooledGateway) => boolean): PooledGateway[] {
    const removed = this.ready.filter(test);
    for (const entry of removed) this.ready.splice(this.ready.indexOf(entry), 1);
    return removed;
  }
}
