import { readFileSync } from 'node:fs';
import { SHORT_ID_PATTERN } from './secrets.js';

const asset = (name: string) => readFileSync(new URL(`../../assets/access/${name}`, import.meta.url), 'utf8');

/** A value as one single-quoted shell word: nothing inside it is ever interpreted. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/**
 * The scripts users pipe to `sh`. They are fixed files with settings assigned at the top as quoted words; the
 * only values put in are the operator's API URL and a short ID already checked against its alphabet.
 */
export class AccessScripts {
  private readonly common = asset('common.sh');
  private readonly entryBody = asset('entry.sh');
  private readonly bootstrapBody = asset('bootstrap.sh');

  constructor(private readonly apiUrl: string) {}

  entry(shortId: string): string {
    if (!SHORT_ID_PATTERN.test(shortId)) throw new TypeError('not a short ID');
    return this.render(`entry script for host ${shortId}`, { CCP_SHORT_ID: shortId }, this.entryBody);
  }

  bootstrap(): string {
    return this.render('bootstrap script', {}, this.bootstrapBody);
  }

  private render(title: string, settings: Record<string, string>, body: string): string {
    const assignments = Object.entries({ CCP_API_URL: this.apiUrl, ...settings })
      .map(([name, value]) => `${name}=${shellQuote(value)}`)
      .join('\n');
    // Everything runs from ccp_main at the very end, so `sh` has read the whole script before anything
    // (ssh in particular) can read from the pipe it came through.
    return `#!/bin/sh\n# cloud-cli-proxy: ${title}\n${assignments}\n\n${this.common}\n${body}`;
  }
}
