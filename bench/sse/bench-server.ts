// The built gateway, wired by the same createGateway as main.ts, plus one bench-only hook: every `publish`
// line on stdin sends one `image-status` event through the event bus, so the fan-out can be timed from outside.
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { loadConfig } from '../../apps/gateway/dist/config.js';
import { createGateway } from '../../apps/gateway/dist/gateway.js';
import { createLogger } from '../../apps/gateway/dist/logger.js';

const config = loadConfig(process.env);
const gateway = await createGateway(config, { logger: createLogger(config) });
await gateway.listen();
process.stdout.write('ready\n');

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() !== 'publish') return;
  const clients = gateway.sse.size;
  const started = performance.now();
  // Wall-clock milliseconds with sub-millisecond precision; the subscribers read the same clock.
  const sentAt = performance.timeOrigin + started;
  gateway.sse.publish({ topic: 'image-status', action: 'update', payload: { sent_at: sentAt } }, null);
  // The hub loops over every stream synchronously; Node's http corks each socket during a write and
  // uncorks it on the next tick, so the bytes only reach the kernel once `flushMs` has passed.
  const fanoutMs = performance.now() - started;
  setImmediate(() => {
    const flushMs = performance.now() - started;
    process.stdout.write(`${JSON.stringify({ clients, fanoutMs, flushMs })}\n`);
  });
});

process.once('SIGTERM', () => {
  gateway.close().finally(() => process.exit(0));
});
