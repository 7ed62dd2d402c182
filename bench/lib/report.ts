/** Nearest-rank percentile of an ascending array (NaN when empty). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export const fixed = (value: number | null, digits = 1): string =>
  value === null || Number.isNaN(value) ? '-' : value.toFixed(digits);

/** Prints rows as an aligned text table; numeric-looking cells are right-aligned. */
export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((title, i) =>
    Math.max(title.length, ...rows.map((row) => (row[i] ?? '').length)),
  );
  const numeric = /^[-+]?[\d.,]+(?:\s?[x%]|\s?ms)?$|^-$/;
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (numeric.test(cell) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
}
