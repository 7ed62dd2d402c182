// One gateway of the SSE fan-out bench: the built gateway, wired by the same createGateway as main.ts, plus one
// bench-only hook: `publish <count> <per second>` on stdin emits that many task progress ticks through the event
// bus, as a running task does, each carrying its wall-clock send time in `stage`.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import type { Task } from '@ccp/api';
import { loadConfig } from '../../apps/gateway/dist/config.js';
import { createGateway } from '../../apps/gateway/dist/gateway.js';
import { createLogger } from '../../apps/gateway/dist/logger.js';

const config = loadConfig(process.env);
const gateway = await createGateway(config, { logger: createLogger(config) });
await gateway.listen();
process.stdout.write('ready\n');

const wallClock = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const task: Task = {
  id: randomUUID(),
  kind: 'start',
  host_id: randomUUID(),
  node: config.node.name,
  user_id: randomUUID(),
  status: 'running',
  progress: 0,
  stage: '',
  message: '',
  error: null,
  requested_by: 'admin:bench',
  created_at: new Date().toISOString(),
  started_at: new Date().toISOString(),
  finished_at: null,
};

/** Emits `count` ticks, `perSecond` a second in slices of 10 ms (0: all at once). */
async function publish(count: number, perSecond: number): Promise<void> {
  const started = performance.now();
  for (let sent = 0; sent < count; ) {
    const due =
      perSecond > 0 ? Math.min(count, Math.ceil(((performance.now() - started) / 1000) * perSecond)) : count;
    for (; sent < due; sent++) {
      gateway.bus.notify({
        type: 'task.progressed',
        task: { ...task, progress: sent % 100, stage: `sent_at=${wallClock().toFixed(3)}` },
      });
    }
    if (sent < count) await sleep(10);
  }
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(`${JSON.stringify({ published: count, seconds })}\n`);
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const [command, count, perSecond] = line.trim().split(' ');
  if (command === 'publish') void publish(Number(count), Number(perSecond));
});

process.once('SIGTERM', () => {
  gateway.close().finally(() => process.exit(0));
});
