import { errors } from './errors.js';

/** Current time as fixed-width RFC 3339 UTC text, the form every stored timestamp uses. */
export function nowIso(): string {
  return new Date().toISOString();
}

/** Normalises any RFC 3339 input (any offset) to UTC text. A leap second (`:60`), which RFC 3339 allows
 * and Date cannot hold, counts as the start of the next second; anything else unusable is a 400. */
export function toIso(value: string | Date, field = 'timestamp'): string {
  if (value instanceof Date) return value.toISOString();
  let time = new Date(value).getTime();
  if (Number.isNaN(time)) time = new Date(value.replace(/:60(?=[.,zZ+-])/, ':59')).getTime() + 1000;
  // Years past 9999 in UTC would print as `+010000-...`, which sorts before every stored timestamp.
  const iso = Number.isNaN(time) ? '' : new Date(time).toISOString();
  if (!/^\d{4}-/.test(iso)) throw errors.validation([{ field, message: 'must be an RFC 3339 timestamp' }]);
  return iso;
}

/** Output form: UTC with a `Z`, without milliseconds when they are zero. */
export function isoOut(value: string): string;
export function isoOut(value: string | null): string | null;
export function isoOut(value: string | null): string | null {
  return value === null ? null : value.replace('.000Z', 'Z');
}
