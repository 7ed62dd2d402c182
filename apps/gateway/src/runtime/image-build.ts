import { spawn } from 'node:child_process';
import path from 'node:path';
import { IMAGE_ROOT, type WorkspaceVariant } from './image-inputs.js';
import { type ProgressReporter, RuntimeError } from './workspace-runtime.js';

/** build.sh marks each step on stderr: `==> [  12s] docker build ccp-workspace:full-…`. */
const STEP = /^==> \[\s*\d+s\] (.*)$/;
/** build.sh takes about this many steps for both images; progress grows with them and stops short of 100. */
const EXPECTED_STEPS = 16;

/**
 * Builds the managed images on this machine with image/build.sh, which needs root (mmdebstrap, the Docker
 * engine) and this checkout's recipes. `rebuild` builds even the images whose tags exist (Debian's updates).
 * Its steps are the progress; a failure carries the script's last words.
 */
export function buildImages(
  variant: WorkspaceVariant,
  rebuild: boolean,
  progress: ProgressReporter,
  script = path.join(IMAGE_ROOT, 'build.sh'),
): Promise<void> {
  return new Promise((resolve, reject) => {
    const args = [script, '--variant', variant, ...(rebuild ? ['--rebuild'] : []), 'all'];
    const child = spawn('bash', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let steps = 0;
    let last = '';
    let pending = '';
    let reporting = Promise.resolve();
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      const lines = (pending + chunk).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line.trim()) last = line.trim();
        const step = STEP.exec(line)?.[1];
        if (!step) continue;
        steps++;
        const percent = Math.min(95, (steps / EXPECTED_STEPS) * 100);
        reporting = reporting.then(() => progress(percent, step)).catch(() => {});
      }
    });
    child.on('error', (error) =>
      reject(new RuntimeError('image_build_failed', `image/build.sh did not start: ${error.message}`)),
    );
    child.once('close', (code) => {
      void reporting.then(() => {
        if (code === 0) resolve();
        else reject(new RuntimeError('image_build_failed', `image/build.sh exited with ${code}: ${last}`));
      });
    });
  });
}
