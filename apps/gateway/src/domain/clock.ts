/** Current time as fixed-width RFC 3339 UTC text, the form every stored timestamp uses. */
export function nowIso(): string {
  return new Date().toISOString();
}

/** Normalises any RFC 3339 input (any offset) to UTC text. */
export function toIso(value: string | Date): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

/** Output form: UTC with a `Z`, without milliseconds when they are zero. */
export function isoOut(value: string): string;
export function isoOut(value: string | null): string | null;
export function isoOut(value: string | null): string | null {
  return value === null ? null : value.replace('.000Z', 'Z');
}
