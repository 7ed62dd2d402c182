import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, type LabGateway, startLabGateway } from '../../../gateway/test/helpers/lab-gateway.js';
import { CLI_DIR, ccpDriver } from './ccp-driver.js';

const exec = promisify(execFile);

export interface CcpGatewaySettings {
  /** The SSH proxy's port, when the test needs it before the gateway starts (for a relay in front of it). */
  sshPort?: number;
  /** Where the gateway tells clients its SSH proxy is (a relay's address); 127.0.0.1 unless given. */
  publicHost?: string;
  /** More of the gateway's settings. */
  env?: Record<string, string>;
}

/**
 * What a test of ccp against a real workspace stands on: a work folder (the client machines' HOME) with an
 * empty local project folder, ccp's driver with a config naming the gateway and the host, and, once `start`ed
 * (in `before`), ccp's bundle built, a lab gateway listening on 127.0.0.1, and a user with a host of theirs,
 * not started (ccp starts it). `stop` (in `after`) ends the terminals, the gateway and its hosts, and the folder.
 */
export class CcpWorkspace {
  readonly work: string;
  readonly project: string;
  readonly driver: ReturnType<typeof ccpDriver>;
  lab!: LabGateway;
  apiUrl!: string;
  sshPort!: number;
  user!: { id: string; username: string; password: string; token: string };
  shortId!: string;
  hostId!: string;

  /** `name` names the folder and, with a random suffix, the user; `config` adds to every client's config. */
  constructor(
    private readonly name: string,
    config: Record<string, unknown> = {},
  ) {
    this.work = mkdtempSync(path.join(tmpdir(), `ccp-${name}-`));
    this.project = path.join(this.work, 'project');
    mkdirSync(this.project);
    this.driver = ccpDriver({
      work: this.work,
      project: this.project,
      config: () => ({ gateway: this.apiUrl, short_id: this.shortId, ...config }),
      password: () => this.user.password,
    });
  }

  async start(settings: CcpGatewaySettings = {}): Promise<void> {
    const [httpPort, sshPort] = [await freePort(), settings.sshPort ?? (await freePort())];
    await exec('npm', ['run', 'bundle'], { cwd: CLI_DIR });
    this.apiUrl = `http://127.0.0.1:${httpPort}`;
    this.sshPort = sshPort;
    this.lab = await startLabGateway({
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: String(httpPort),
      SSH_PROXY_PORT: String(sshPort),
      PUBLIC_HOST: settings.publicHost ?? '127.0.0.1',
      PUBLIC_API_URL: this.apiUrl,
      ...settings.env,
    });
    const username = `${this.name}${randomBytes(3).toString('hex')}`;
    this.user = { username, ...(await this.lab.t.createUser(username)) };
    ({ short_id: this.shortId, id: this.hostId } = await this.lab.createHost(this.user.id));
  }

  async stop(): Promise<void> {
    this.driver.kill();
    await this.lab?.close();
    rmSync(this.work, { recursive: true, force: true });
  }
}
