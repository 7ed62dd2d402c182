import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { EXEC_OUTPUT_CAP } from '../../src/runtime/capped-output.js';
import { DockerWorkspaceRuntime } from '../../src/runtime/docker-workspace-runtime.js';
import { RuntimeError } from '../../src/runtime/workspace-runtime.js';
import { ADMIN_PASSWORD } from '../helpers/test-gateway.js';

/** Stops the flood on its own past this much, so that the code before the fix ends (with it all in memory). */
const FLOOD_LIMIT = 64 * EXEC_OUTPUT_CAP;
const FRAME = 64 * 1024;

/**
 * What `docker exec` of `yes` sends back: Docker's multiplexed frames (stream, 0, 0, 0, length) of "y\n", as fast
 * as they are read, until FLOOD_LIMIT. One macrotask per frame, as a socket delivers them.
 */
function flood(streamType: 1 | 2): { stream: Readable; produced: () => number } {
  const payload = Buffer.from('y\n'.repeat(FRAME / 2));
  const header = Buffer.from([streamType, 0, 0, 0, 0, 0, 0, 0]);
  header.writeUInt32BE(payload.length, 4);
  const frame = Buffer.concat([header, payload]);
  let produced = 0;
  const stream = new Readable({
    read() {
      setImmediate(() => {
        if (produced >= FLOOD_LIMIT) {
          this.push(null);
          return;
        }
        produced += payload.length;
        this.push(frame);
      });
    },
  });
  return { stream, produced: () => produced };
}

/** Just enough of dockerode for `exec`: one running workspace whose every exec floods; the demuxer is Docker's own. */
function floodingEngine(streamType: 1 | 2) {
  const floods: ReturnType<typeof flood>[] = [];
  const docker = {
    modem: new Docker({ socketPath: '/nonexistent/docker.sock' }).modem,
    listContainers: async () => [{ Id: 'workspace' }],
    getContainer: () => ({
      inspect: async () => ({
        Id: 'workspace',
        State: { Running: true, Restarting: false, Pid: 4242 },
        NetworkSettings: { Networks: {} },
        Config: { Labels: {} },
        HostConfig: {},
        Mounts: [],
      }),
      exec: async () => ({
        start: async () => {
          const next = flood(streamType);
          floods.push(next);
          return next.stream;
        },
        // Still running: the gateway stopped reading, the command did not stop printing.
        inspect: async () => ({ Running: true, ExitCode: null }),
      }),
    }),
  } as unknown as Docker;
  return { docker, floods };
}

/**
 * A workspace is the user's: they may replace `ccp-desktop` (which the gateway runs with `docker exec` for the
 * desktop controls) with `yes`, then ask for desktop restarts in parallel. Every byte it prints must not stay in
 * the gateway's memory; the real engine's path runs in test/vnc/desktop-docker.test.ts (Docker tier).
 */
describe('attack: flooding the gateway through the output of a command it runs in the workspace', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'ccp-exec-flood-'));
  after(() => rmSync(dataDir, { recursive: true, force: true }));
  const config = loadConfig({
    ADMIN_JWT_SECRET: randomBytes(36).toString('base64'),
    ADMIN_PASSWORD,
    DATA_DIR: dataDir,
  });
  const runtimeOn = (docker: Docker) =>
    new DockerWorkspaceRuntime({
      docker,
      engine: v2rayEngine,
      images: { workspace: 'ccp-workspace:test-000000000000', egressGateway: 'ccp-egress:test-000000000000' },
      dataDir,
      egress: config.egress,
    });

  for (const [name, streamType] of [
    ['stdout', 1],
    ['stderr', 2],
  ] as const) {
    it(`stops reading past ${EXEC_OUTPUT_CAP} bytes on ${name}, for each of parallel calls, and says why`, async () => {
      const { docker, floods } = floodingEngine(streamType);
      const runtime = runtimeOn(docker);
      const calls = Array.from({ length: 4 }, () =>
        runtime.exec('flooded', ['ccp-desktop', 'restart'], 30_000).then(
          (result) => ({ result, error: null }),
          (error: unknown) => ({ result: null, error }),
        ),
      );
      for (const { result, error } of await Promise.all(calls)) {
        assert.equal(
          result,
          null,
          `no result: ${result ? `${result.stdout.length + result.stderr.length} bytes kept` : ''}`,
        );
        assert.ok(error instanceof RuntimeError, String(error));
        assert.equal(error.code, 'exec_output_too_large');
        assert.match(error.message, /ccp-desktop restart/);
      }
      assert.equal(floods.length, 4);
      for (const { produced } of floods) {
        assert.ok(produced() < EXEC_OUTPUT_CAP + 4 * FRAME, `read ${produced()} bytes of the flood`);
      }
    });
  }
});
