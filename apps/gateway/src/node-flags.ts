/**
 * V8's heap settings for the gateway. V8 sizes its heap when the process starts, before any of the gateway's code
 * runs, so these are flags of the command that starts it (`npm start`, the systemd unit, the tests' and benches'
 * gateways), not something main.ts can set. Without them, relaying an SSH transfer put the gateway into a loop of
 * full garbage collections about ten times a second, half a CPU spent marking a heap that had not changed, and
 * the proxy moved 50–70 % of a direct transfer instead of 85–97 % (docs/performance.md, "The garbage collector
 * under a transfer").
 */
export const HEAP_FLAGS = [
  // The young generation stays at V8's first size (1 MiB a half) instead of growing to 32: every socket read of a
  // relayed transfer arrives in a new 64 KiB buffer, and frequent young collections free those buffers while they
  // are young, where rare ones left them to pile up until V8 asked for a full collection.
  '--max-semi-space-size=1',
  // A full collection lets the old generation double before the next one. After each, V8 had set the limit a few
  // MiB above what lived, less than the young generation can promote at once, and started marking again at once.
  '--heap-growing-percent=100',
] as const;

/** The node flags of every gateway process, before apps/gateway/dist/main.js. */
export const GATEWAY_NODE_FLAGS = ['--enable-source-maps', ...HEAP_FLAGS] as const;

/** A flag's name as V8 compares it: dashes and underscores are the same. */
const flagName = (flag: string) => flag.split('=')[0]!.replaceAll('_', '-');

/**
 * The heap flags this process was started without, by name (another value is the operator's choice), from its
 * command line and NODE_OPTIONS (where node allows --max-semi-space-size but refuses --heap-growing-percent).
 */
export function missingHeapFlags(execArgv: readonly string[], nodeOptions = ''): string[] {
  const given = new Set([...execArgv, ...nodeOptions.split(/\s+/)].map(flagName));
  return HEAP_FLAGS.filter((flag) => !given.has(flagName(flag)));
}

/** The start-up warning of a gateway started without the heap flags; null when it has them. */
export function heapFlagsWarning(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions = process.env.NODE_OPTIONS,
): string | null {
  const missing = missingHeapFlags(execArgv, nodeOptions);
  if (missing.length === 0) return null;
  return (
    `node was started without ${missing.join(' ')}: relaying SSH transfers, the gateway's garbage collector can ` +
    'take half a CPU and a third of the throughput. Start the gateway with `npm start` or the systemd unit, or ' +
    `as \`node ${GATEWAY_NODE_FLAGS.join(' ')} apps/gateway/dist/main.js\``
  );
}
