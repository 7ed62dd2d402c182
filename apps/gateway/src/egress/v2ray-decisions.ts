import { isIPv4, isIPv6 } from 'node:net';
import type { DecisionCount, PolicyDecision, ReadDecisions } from './tunnel-engine.js';
import { BLOCKED_TAG, WOULD_BLOCK_TAG } from './v2ray-policy.js';

/**
 * Where v2ray writes the log the policy's decisions are read from, in the egress gateway: on the size-limited
 * tmpfs at /tmp (container-specs.ts), so a workspace opening connections in a loop fills memory the gateway was
 * given, no more, and no disk.
 */
export const DECISION_LOG_PATH = '/tmp/ccp-egress-decisions.log';

/**
 * The log section of a config whose policy decides: v2ray's access log names the destination before sniffing
 * (an address), so the decisions come from its info log, whose `taking detour [tag] for [tcp:name:port]` names
 * the route and the name sniffing recovered. Warnings go there too while a policy decides.
 */
export function v2rayDecisionLog() {
  return { error: DECISION_LOG_PATH, loglevel: 'info' as const };
}

const DETOUR =
  /^(\d{4})\/(\d\d)\/(\d\d) (\d\d):(\d\d):(\d\d) \[Info\] \[\d{1,20}\] v2ray\.com\/core\/app\/dispatcher: taking detour \[([a-z-]+)\] for \[(?:tcp|udp):(.{1,300}):(\d{1,5})\]$/;
const DECISIONS: Record<string, PolicyDecision> = {
  [BLOCKED_TAG]: 'blocked',
  [WOULD_BLOCK_TAG]: 'would_block',
};
/** What a DNS name may hold here (RFC 1035 labels, and `_` as some services use); lower-cased first. */
const DNS_NAME =
  /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;
/** Lines longer than this are not v2ray's detour lines (a name is at most 253 characters). */
const MAX_LINE = 400;
/** A line's time may be this far from the reading's (v2ray's clock is this machine's). */
const CLOCK_SLACK_MS = 2 * 86_400_000;

/**
 * The destination a detour line names, as stored: a DNS name (lower case), an IPv4 or IPv6 address. Anything
 * else is refused: the workspace chooses the names it connects to (TLS SNI, HTTP Host), in any bytes.
 */
export function checkedDestination(text: string): string | null {
  const name = text.toLowerCase();
  if (isIPv4(name)) return name;
  if (name.startsWith('[') && name.endsWith(']') && isIPv6(name.slice(1, -1))) return name.slice(1, -1);
  return DNS_NAME.test(name) ? name : null;
}

/**
 * The policy's decisions in v2ray's info log, counted per minute, decision, destination and port. Other lines
 * are skipped; a detour line of ours whose destination, port or time is not plausible is counted as refused
 * (a name with a newline in its SNI can even make up a whole line, but only one the workspace could also have
 * caused by connecting there).
 */
export function parseV2rayDecisions(text: string, readAt: Date): ReadDecisions {
  const counts = new Map<string, DecisionCount>();
  let refused = 0;
  for (const line of text.split('\n')) {
    if (!line.includes('taking detour [policy-')) continue;
    const match = line.length <= MAX_LINE ? DETOUR.exec(line) : null;
    const decision = match ? DECISIONS[match[7]!] : undefined;
    if (!match || !decision) {
      refused += 1;
      continue;
    }
    const [, year, month, day, hour, minute, second] = match.map(Number);
    const at = Date.UTC(year!, month! - 1, day!, hour!, minute!, second!);
    const real = new Date(at).getUTCDate() === day && hour! < 24 && minute! < 60 && second! < 60;
    const destination = checkedDestination(match[8]!);
    const port = Number(match[9]);
    if (!destination || port > 65535 || !real || !(Math.abs(at - readAt.getTime()) <= CLOCK_SLACK_MS)) {
      refused += 1;
      continue;
    }
    const seen = new Date(at).toISOString();
    const minuteOf = `${seen.slice(0, 16)}:00.000Z`;
    const key = `${minuteOf} ${decision} ${destination} ${port}`;
    const count = counts.get(key);
    if (count) {
      count.count += 1;
      if (seen > count.lastSeen) count.lastSeen = seen;
    } else counts.set(key, { minute: minuteOf, decision, destination, port, count: 1, lastSeen: seen });
  }
  return { counts: [...counts.values()], refused, overflowed: false };
}
