import { readFileSync } from 'node:fs';
import { SHORT_ID_PATTERN } from '../access/secrets.js';
import { type AccessSettings, accessCommandWarning } from '../hosts/host-view.js';
import { passwordInTheClearWarning } from './download-transport.js';
import { shellScript } from './shell-script.js';

const asset = (name: string) =>
  readFileSync(new URL(`../../../assets/access/${name}`, import.meta.url), 'utf8');

/**
 * The scripts users pipe to `sh`. They are fixed files with settings assigned at the top as quoted words; the
 * only values put in are the operator's API URL, a short ID already checked against its alphabet, and the
 * gateway's own warning when the script or the password it sends travels in the clear.
 */
export class AccessScripts {
  private readonly common = asset('common.sh');
  private readonly entryBody = asset('entry.sh');
  private readonly bootstrapBody = asset('bootstrap.sh');

  constructor(private readonly access: Pick<AccessSettings, 'publicApiUrl' | 'publicEntryUrl'>) {}

  entry(shortId: string): string {
    if (!SHORT_ID_PATTERN.test(shortId)) throw new TypeError('not a short ID');
    return this.render(
      `entry script for host ${shortId}`,
      { CCP_SHORT_ID: shortId },
      accessCommandWarning(this.access),
      this.entryBody,
    );
  }

  bootstrap(): string {
    // It is fetched from the API URL, and sends the password there.
    const warning = passwordInTheClearWarning('The bootstrap command', [this.access.publicApiUrl]);
    return this.render('bootstrap script', {}, warning, this.bootstrapBody);
  }

  private render(
    title: string,
    settings: Record<string, string>,
    warning: string | null,
    body: string,
  ): string {
    // Everything runs from ccp_main at the very end, so `sh` has read the whole script before anything
    // (ssh in particular) can read from the pipe it came through.
    return shellScript({
      title,
      settings: { CCP_API_URL: this.access.publicApiUrl, ...settings },
      plainHttpWarning: warning,
      body: `${this.common}\n${body}`,
    });
  }
}
