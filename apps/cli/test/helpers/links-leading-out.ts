import { lstatSync, readdirSync, realpathSync } from 'node:fs';
import path from 'node:path';

/** Every link under `dir` whose target the kernel resolves outside `root` (dangling links count as unknown). */
export function linksLeadingOut(root: string, dir = root): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const at = path.join(dir, name);
    const stats = lstatSync(at);
    if (stats.isSymbolicLink()) {
      let real: string | null = null;
      try {
        real = realpathSync.native(at);
      } catch {}
      if (real !== null && real !== root && !real.startsWith(`${root}/`))
        out.push(`${path.relative(root, at)} -> ${real}`);
    } else if (stats.isDirectory()) out.push(...linksLeadingOut(root, at));
  }
  return out;
}
