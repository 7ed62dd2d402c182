// One autocannon run in its own process, so the load generator never shares an event loop with the
// server; prints a JSON summary on stdout. Latencies come from every response as a float (autocannon's
// own histogram has whole-millisecond resolution, too coarse for sub-millisecond responses).
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { percentile } from '../lib/report.js';

export interface LoadSpec {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  connections: number;
  durationS: number;
  /** Requests per second over all connections; unthrottled when absent. */
  rate?: number;
}

export interface LoadResult {
  requests: number;
  reqPerSec: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
  non2xx: number;
}

const spec = JSON.parse(process.argv[2] ?? '') as LoadSpec;
const latencies: number[] = [];
const started = performance.now();
const instance = autocannon(
  {
    url: spec.url,
    method: spec.method,
    headers: spec.headers,
    ...(spec.body === undefined ? {} : { body: spec.body }),
    connections: spec.connections,
    duration: spec.durationS,
    ...(spec.rate === undefined ? {} : { overallRate: spec.rate }),
    timeout: 10,
  },
  (error, result) => {
    if (error) {
      console.error(error.message);
      process.exit(1);
    }
    const seconds = (performance.now() - started) / 1000;
    const sorted = Float64Array.from(latencies).sort();
    const summary: LoadResult = {
      requests: latencies.length,
      reqPerSec: latencies.length / seconds,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
      max: sorted.length > 0 ? sorted[sorted.length - 1]! : Number.NaN,
      errors: result.errors,
      non2xx: result.non2xx,
    };
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  },
);
instance.on('response', (_client, _status, _bytes, ms) => {
  latencies.push(ms);
});
