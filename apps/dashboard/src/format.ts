/** Local date and time for tables; the ISO value stays in the title for precision. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** How long until an instant, in minutes and hours ("in 26 min", "in 2 h 5 min"); "now" once it is past. */
export function timeLeft(iso: string, now = Date.now()): string {
  const minutes = Math.floor((Date.parse(iso) - now) / 60_000);
  if (minutes < 1) return 'now';
  if (minutes < 60) return `in ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `in ${hours} h` : `in ${hours} h ${minutes % 60} min`;
}

/** `datetime-local` input value (local time) from an ISO timestamp, and back. */
export function toLocalInput(iso: string | null): string {
  if (!iso) return '';
  const date = new Date(iso);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

export function fromLocalInput(value: string): string | null {
  if (!value) return null;
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toISOString();
}

/** Date and time to the second, for heartbeats (a node is silent after some seconds, not minutes). */
export function whenExact(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** A machine's memory from megabytes (MiB, as the gateway counts them). */
export function memory(mb: number): string {
  return mb >= 1024 ? `${(mb / 1024).toFixed(1)} GiB` : `${mb} MiB`;
}

/** Bytes in binary units (KiB, MiB, GiB), as the egress meter's figures are read. */
export function bytes(count: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = count;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${count} B` : `${value.toFixed(1)} ${units[unit]}`;
}
