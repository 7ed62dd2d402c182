import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { transportOf } from '@ccp/api';
import { DomainError } from '../errors.js';
import { plainHttpWarning } from './download-transport.js';
import { shellScript } from './shell-script.js';

const installScript = () =>
  readFile(new URL('../../../assets/access/install-ccp.sh', import.meta.url), 'utf8');

export interface CliBundleFile {
  /** The module's text (UTF-8, as built). */
  text: string;
  sha256: string;
}

/**
 * The users' CLI, served by the gateway so that getting it takes one line: the bundle, its checksum, and an
 * install script that checks one against the other before anything is put on the user's PATH.
 */
export class CliBundle {
  private cached: { mtime: number; file: CliBundleFile } | null = null;

  constructor(
    private readonly bundlePath: string,
    private readonly apiUrl: string,
  ) {}

  /** The bundle as built; read again when the file changed (a rebuild while the gateway runs). */
  async file(): Promise<CliBundleFile> {
    let mtime: number;
    try {
      mtime = (await stat(this.bundlePath)).mtimeMs;
    } catch {
      throw new DomainError(
        'not_found',
        'cli_unavailable',
        'This gateway was built without the CLI bundle (npm run build makes apps/cli/dist/ccp.mjs)',
      );
    }
    if (this.cached?.mtime !== mtime) {
      const bytes = await readFile(this.bundlePath);
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      this.cached = { mtime, file: { text: bytes.toString('utf8'), sha256 } };
    }
    return this.cached.file;
  }

  /** `<sha256>  ccp.mjs`, the format `sha256sum -c` reads. */
  async checksumLine(): Promise<string> {
    return `${(await this.file()).sha256}  ccp.mjs\n`;
  }

  /**
   * The checksum and how the download travels, for the portal: there it comes over an authenticated call, which
   * no shared cache answers for someone else, and a user can hold it against what the install script printed.
   */
  async release() {
    return {
      file_name: 'ccp.mjs' as const,
      sha256: (await this.file()).sha256,
      download_url: `${this.apiUrl}/v1/cli/ccp.mjs`,
      transport: transportOf(this.apiUrl),
      warning: plainHttpWarning(this.apiUrl),
    };
  }

  /**
   * The install script: the API URL, the bundle's checksum and the plain-HTTP warning (empty over TLS or the
   * loopback) as quoted words, then a fixed body.
   */
  async installer(): Promise<string> {
    return shellScript({
      title: 'installs the ccp command-line client',
      settings: { CCP_API_URL: this.apiUrl, CCP_SHA256: (await this.file()).sha256 },
      plainHttpWarning: plainHttpWarning(this.apiUrl),
      body: await installScript(),
    });
  }
}
