export type DnsTransport = 'udp' | 'tcp' | 'doh';

export interface DnsLogEntry {
  /** The querier's address as the probe saw it (IPv4-mapped IPv6 shown as plain IPv4). */
  address: string;
  transport: DnsTransport;
  /** Query type, e.g. `A`, `TXT`. */
  type: string;
  /** ISO 8601 time the query arrived. */
  at: string;
}

/** Who asked for which name, bounded so a long-running probe cannot grow without limit. */
export class DnsLog {
  private readonly byName = new Map<string, DnsLogEntry[]>();
  private size = 0;

  constructor(private readonly limit: number) {}

  record(name: string, entry: DnsLogEntry): void {
    const key = normaliseName(name);
    const entries = this.byName.get(key);
    if (entries) entries.push(entry);
    else this.byName.set(key, [entry]);
    this.size += 1;
    // Maps iterate in insertion order, so the first key is the name first asked for longest ago.
    while (this.size > this.limit) {
      const [oldest, dropped] = this.byName.entries().next().value as [string, DnsLogEntry[]];
      this.byName.delete(oldest);
      this.size -= dropped.length;
    }
  }

  lookup(name: string): DnsLogEntry[] {
    return [...(this.byName.get(normaliseName(name)) ?? [])];
  }
}

export function normaliseName(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

export function normaliseAddress(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}
