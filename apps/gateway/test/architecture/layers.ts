/**
 * The layer of each of the gateway's parts, from the top (1) down, as in docs/architecture.md: a part imports only
 * parts of a greater layer, never one beside or above it. `root` is the composition root, the files at the top of src/.
 */
export const LAYERS: Record<string, number> = {
  root: 1,
  ops: 1,
  http: 2,
  ssh: 3,
  vnc: 3,
  cluster: 4,
  domain: 5,
  events: 6,
  runtime: 7,
  egress: 8,
  store: 9,
  shared: 10,
};

/** The part a module of apps/gateway/src belongs to, from its path relative to src (`domain/access/access.ts`). */
export const partOf = (modulePath: string): string =>
  modulePath.includes('/') ? modulePath.slice(0, modulePath.indexOf('/')) : 'root';
