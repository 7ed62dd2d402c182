// Builds dist/ccp.mjs: the whole CLI in one file that needs only Node.js 22 (ssh2's optional native
// speed-ups are left out; it falls back to its JavaScript code).
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

/** The bundle's esbuild options (a test builds with them to see which packages ship inside). */
export const bundleOptions = {
  entryPoints: [new URL('../src/main.ts', import.meta.url).pathname],
  outfile: new URL('../dist/ccp.mjs', import.meta.url).pathname,
  bundle: true,
  platform: 'node',
  target: 'node22',
  format: 'esm',
  conditions: ['source'],
  external: ['cpu-features', '*.node'],
  // CommonJS dependencies (ssh2) expect require and __dirname.
  banner: {
    js: [
      "import { createRequire as __ccpRequire } from 'node:module';",
      "import { dirname as __ccpDirname } from 'node:path';",
      "import { fileURLToPath as __ccpPath } from 'node:url';",
      'const require = __ccpRequire(import.meta.url);',
      'const __filename = __ccpPath(import.meta.url);',
      'const __dirname = __ccpDirname(__filename);',
    ].join('\n'),
  },
  logLevel: 'warning',
};

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await build(bundleOptions);
