import { SETTINGS } from './config.js';
import { describeVariables } from './shared/settings.js';

/** docs/configuration.md keeps its prose; the tables between these lines are written from SETTINGS. */
const START =
  "<!-- settings tables: written by `npm run docs:config` from each part's settings.ts; do not edit -->";
const END = '<!-- end of settings tables -->';

/** One table per part: variable, type, default, description (a secret's default is never shown). */
export function settingsTables(): string {
  const sections = SETTINGS.map(({ title, source, variables }) => {
    const rows = describeVariables(variables).map((v) => [`\`${v.name}\``, v.type, v.default, v.description]);
    return `### ${title}\n\nFrom \`${source}\`.\n\n${table(['Variable', 'Type', 'Default', 'Description'], rows)}`;
  });
  return `${START}\n\n${sections.join('\n\n')}\n\n${END}`;
}

/** `doc` with its settings tables as SETTINGS writes them; throws when the markers are missing. */
export function withSettingsTables(doc: string): string {
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/configuration.md needs the lines\n${START}\n${END}`);
  return `${doc.slice(0, start)}${settingsTables()}${doc.slice(end + END.length)}`;
}

/** A Markdown table padded as Biome formats it, so that `biome check` and the generator agree. */
function table(header: string[], rows: string[][]): string {
  const cells = [header, ...rows].map((row) => row.map((cell) => cell.replaceAll('|', '\\|')));
  const widths = header.map((_, column) => Math.max(3, ...cells.map((row) => row[column]!.length)));
  const line = (row: string[]) =>
    `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(' | ')} |`;
  return [
    line(cells[0]!),
    `| ${widths.map((width) => '-'.repeat(width)).join(' | ')} |`,
    ...cells.slice(1).map(line),
  ].join('\n');
}
