/**
 * The import graph of apps/gateway/src, read with the TypeScript compiler (type-only imports count: a cycle of
 * types is still a cycle): no module imports itself back through others, and no part imports one beside or above
 * it (layers.ts, docs/architecture.md).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { LAYERS, partOf } from './layers.js';

const src = path.resolve(import.meta.dirname, '../../src');

/** Every module's relative imports, as paths relative to src with `.ts` (what `.js` names in the source). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const entry of readdirSync(src, { recursive: true, encoding: 'utf8' })) {
    if (!entry.endsWith('.ts')) continue;
    const from = entry.split(path.sep).join('/');
    const info = ts.preProcessFile(readFileSync(path.join(src, entry), 'utf8'), true, true);
    graph.set(
      from,
      info.importedFiles
        .map((ref) => ref.fileName)
        .filter((name) => name.startsWith('.'))
        .map((name) =>
          path.posix.normalize(path.posix.join(path.posix.dirname(from), name)).replace(/\.js$/, '.ts'),
        ),
    );
  }
  return graph;
}

/** One cycle per strongly connected component of more than one module (or a module importing itself). */
function cycles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const trail: string[] = [];
  const visit = (module: string) => {
    state.set(module, 'open');
    trail.push(module);
    for (const next of graph.get(module) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === 'open') found.push([...trail.slice(trail.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    trail.pop();
    state.set(module, 'done');
  };
  for (const module of [...graph.keys()].sort()) if (!state.has(module)) visit(module);
  return found;
}

describe('import graph of apps/gateway/src', () => {
  const graph = importGraph();

  it('reads the modules it checks', () => {
    assert.ok(graph.size > 100, `only ${graph.size} modules under ${src}`);
    assert.ok(
      graph.get('domain/access/access.ts')?.includes('store/users-repository.ts'),
      'domain/access/access.ts imports',
    );
  });

  it('has no import cycle', () => {
    assert.deepEqual(
      cycles(graph).map((cycle) => cycle.join(' → ')),
      [],
    );
  });

  it('places every module in a part of docs/architecture.md', () => {
    const unplaced = [...graph.keys()].filter((module) => LAYERS[partOf(module)] === undefined);
    assert.deepEqual(unplaced, [], 'add the new folder to docs/architecture.md, layers.ts and biome.json');
  });

  it('has no import beside or above the importing part, and none leaving src', () => {
    const wrong: string[] = [];
    for (const [from, targets] of graph) {
      for (const to of targets) {
        if (to.startsWith('../')) {
          wrong.push(`${from} → ${to} (outside apps/gateway/src: apps meet only in packages/api)`);
          continue;
        }
        const [fromPart, toPart] = [partOf(from), partOf(to)];
        if (fromPart === toPart) continue;
        if (LAYERS[toPart]! <= LAYERS[fromPart]!)
          wrong.push(`${from} → ${to} (${fromPart} imports ${toPart})`);
      }
    }
    assert.deepEqual(wrong, []);
  });
});
