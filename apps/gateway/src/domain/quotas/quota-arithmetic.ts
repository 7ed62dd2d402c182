import type { HostResources, QuotaName, Quotas, QuotaUse, ResourceDefaults } from '@ccp/api';

/**
 * The arithmetic of resources and quotas, free of storage and engines: what a host runs with, what a user's hosts
 * take of each quota, and which quota a change would pass.
 */

/** A host's own values; null where it follows its owner's default, or the gateway's. */
export type ResourceOverrides = ResourceDefaults;

/** Each value: the host's own, else its owner's default, else the gateway's. */
export function effectiveResources(
  host: ResourceOverrides,
  userDefaults: ResourceDefaults,
  global: HostResources,
): HostResources {
  return {
    cpus: host.cpus ?? userDefaults.cpus ?? global.cpus,
    memory_mb: host.memory_mb ?? userDefaults.memory_mb ?? global.memory_mb,
    pids: host.pids ?? userDefaults.pids ?? global.pids,
    home_mb: host.home_mb ?? userDefaults.home_mb ?? global.home_mb,
  };
}

/** A host as the quotas count it: running (or starting, which is on its way to run) or not, and its sizes. */
export interface CountedHost {
  live: boolean;
  resources: HostResources;
}

/** CPUs are summed in thousandths, so 0.1 + 0.2 is 0.3 and a quota of 0.3 holds them. */
const milli = (cpus: number) => Math.round(cpus * 1000);

export function quotaUse(hosts: CountedHost[]): QuotaUse {
  const live = hosts.filter((host) => host.live);
  return {
    hosts: hosts.length,
    running_hosts: live.length,
    cpus: live.reduce((sum, host) => sum + milli(host.resources.cpus), 0) / 1000,
    memory_mb: live.reduce((sum, host) => sum + host.resources.memory_mb, 0),
    home_mb: hosts.reduce((sum, host) => sum + host.resources.home_mb, 0),
  };
}

/** What a change adds to each quota (negative where it frees some). */
export type QuotaDelta = Partial<QuotaUse>;

/** What adding a host counts: one host and its home. */
export function newHostDelta(resources: HostResources): QuotaDelta {
  return { hosts: 1, home_mb: resources.home_mb };
}

/** What starting a host counts: one running host, its CPUs and its memory. */
export function startDelta(resources: HostResources): QuotaDelta {
  return { running_hosts: 1, cpus: resources.cpus, memory_mb: resources.memory_mb };
}

/** What resizing a host counts: its home always, its CPUs and memory only while it runs. */
export function resizeDelta(before: HostResources, after: HostResources, live: boolean): QuotaDelta {
  return {
    home_mb: after.home_mb - before.home_mb,
    ...(live
      ? {
          cpus: (milli(after.cpus) - milli(before.cpus)) / 1000,
          memory_mb: after.memory_mb - before.memory_mb,
        }
      : {}),
  };
}

/** A quota a change would pass: which, its value, what is used and what the change asked for. */
export interface QuotaExcess {
  quota: QuotaName;
  limit: number;
  used: number;
  requested: number;
}

const ORDER: QuotaName[] = ['hosts', 'running_hosts', 'cpus', 'memory_mb', 'home_mb'];

/**
 * The first quota the change would take past its value, or null. Only what grows is judged: a change that frees
 * some of a quota already exceeded (a quota lowered below the use) is let through.
 */
export function quotaExcess(quotas: Quotas, use: QuotaUse, delta: QuotaDelta): QuotaExcess | null {
  for (const quota of ORDER) {
    const limit = quotas[quota];
    const requested = delta[quota] ?? 0;
    if (limit === null || requested <= 0) continue;
    const after = quota === 'cpus' ? (milli(use.cpus) + milli(requested)) / 1000 : use[quota] + requested;
    const over = quota === 'cpus' ? milli(after) > milli(limit) : after > limit;
    if (over) return { quota, limit, used: use[quota], requested };
  }
  return null;
}

const WORDS: Record<QuotaName, { name: string; unit: string }> = {
  hosts: { name: 'hosts', unit: '' },
  running_hosts: { name: 'running hosts', unit: '' },
  cpus: { name: 'CPUs of running hosts', unit: '' },
  memory_mb: { name: 'memory of running hosts', unit: ' MiB' },
  home_mb: { name: 'home volumes', unit: ' MiB' },
};

/** The message a refused change answers with: the quota, what is used of it, what was asked. */
export function describeExcess(excess: QuotaExcess, username: string): string {
  const { name, unit } = WORDS[excess.quota];
  return (
    `Quota of ${name} exceeded for ${username}: ${excess.used}${unit} of ${excess.limit}${unit} in use, ` +
    `this would add ${excess.requested}${unit}; stop or shrink another host, or ask an administrator to raise the quota`
  );
}
