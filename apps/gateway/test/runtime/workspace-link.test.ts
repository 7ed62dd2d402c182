import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { needs } from '../../../../test/support/needs.js';
import { WORKSPACE_LINK } from '../../src/runtime/egress-gateway-files.js';
import { linkWorkspace } from '../../src/runtime/netns.js';
import { RuntimeError } from '../../src/runtime/workspace-runtime.js';

const exec = promisify(execFile);

/** A process in a network namespace of its own, as an egress gateway or a workspace has. */
async function inNewNetns(): Promise<ChildProcess> {
  const child = spawn('unshare', ['--net', '--', 'sleep', '60'], { stdio: 'ignore' });
  const own = readlinkSync('/proc/self/ns/net');
  for (let tries = 0; readlinkSync(`/proc/${child.pid}/ns/net`) === own; tries++) {
    assert.ok(tries < 100, 'unshare made no namespace');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return child;
}

const links = async (pid?: number) =>
  (await exec('nsenter', [...(pid ? [`--net=/proc/${pid}/ns/net`] : []), '--', 'ip', '-o', 'link'])).stdout;

/**
 * The workspace's container asks Docker for no network at all (container-specs.ts), trusting runc to give it a
 * namespace of its own. A container engine that did not would have the link's address and default route set on
 * the host: the link fails closed instead.
 */
describe("the workspace's link to its egress gateway", { skip: needs('root') }, () => {
  let gateway: ChildProcess;
  let workspace: ChildProcess;

  before(async () => {
    gateway = await inNewNetns();
    workspace = await inNewNetns();
  });

  after(() => {
    gateway.kill();
    workspace.kill();
  });

  it("is refused for a workspace in the host's namespace, which is left as it was", async () => {
    const before = await links();
    await assert.rejects(
      linkWorkspace(gateway.pid!, process.pid),
      (error: unknown) =>
        error instanceof RuntimeError &&
        error.code === 'network_setup_failed' &&
        /shares the host's network namespace/.test(error.message),
    );
    assert.equal(await links(), before);
    assert.doesNotMatch(await links(gateway.pid), new RegExp(WORKSPACE_LINK.gatewayInterface));
  });

  it("is refused for a workspace in its egress gateway's namespace", async () => {
    await assert.rejects(
      linkWorkspace(gateway.pid!, gateway.pid!),
      /shares its egress gateway's network namespace/,
    );
    assert.doesNotMatch(await links(gateway.pid), new RegExp(WORKSPACE_LINK.gatewayInterface));
  });

  it('is made between two namespaces of their own', async () => {
    await linkWorkspace(gateway.pid!, workspace.pid!);
    assert.match(await links(gateway.pid), new RegExp(`${WORKSPACE_LINK.gatewayInterface}@`));
    const route = (
      await exec('nsenter', [`--net=/proc/${workspace.pid}/ns/net`, '--', 'ip', 'route', 'show', 'default'])
    ).stdout;
    assert.match(route, new RegExp(`default via ${WORKSPACE_LINK.gatewayAddress.replaceAll('.', '\\.')} `));
  });
});
