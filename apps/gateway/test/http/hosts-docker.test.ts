import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import type { LabDescription } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { egressGatewayName, HOST_LABEL, POOL_LABEL } from '../../src/runtime/container-specs.js';
import { expectedImageTag } from '../../src/runtime/image-inputs.js';
import { type LabGateway, removeHostResources, startLabGateway } from '../helpers/lab-gateway.js';
import { DATABASES, type TestGateway } from '../helpers/test-gateway.js';

const exec = promisify(execFile);
const docker = new Docker({ socketPath: '/var/run/docker.sock' });
const skip = needs('lab', 'docker');

/** A host's containers and volumes: by its label, and its egress gateway taken from the pool by its name. */
async function labelled(hostId: string) {
  const filters = { label: [`${HOST_LABEL}=${hostId}`] };
  const taken = await docker.listContainers({
    all: true,
    filters: { label: [POOL_LABEL], name: [`^/${egressGatewayName(hostId)}$`] },
  });
  const containers = [...(await docker.listContainers({ all: true, filters })), ...taken];
  const { Volumes } = await docker.listVolumes({ filters });
  return { containers, volumes: Volumes ?? [] };
}

for (const kind of DATABASES) {
  describe(`hosts on the real Docker runtime, end to end (${kind})`, { skip, timeout: 600_000 }, () => {
    let labGateway: LabGateway;
    let lab: LabDescription;
    let t: TestGateway;
    let egressIpId: string;
    const created: string[] = [];

    before(async () => {
      // Running hosts are compared with the engine every second (one test stops a container behind its back).
      labGateway = await startLabGateway({ HOST_CHECK_SECONDS: '1' }, kind);
      ({ t, lab, egressIpId } = labGateway);
    });
    after(async () => {
      await labGateway?.close();
      await removeHostResources(created);
    });

    const waitTask = async (taskId: string) => {
      await t.gateway.tasks.idle();
      return (await t.request('GET', `/v1/admin/tasks/${taskId}`)).body;
    };

    it('creates, starts, rebuilds (keeping home), stops and deletes a workspace', async () => {
      const user = await t.createUser('dora');
      const host = (
        await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: egressIpId } })
      ).body;
      created.push(host.id);
      // Its workspace is made and set up with it (run once without a network, then stopped), so its first start
      // is a `docker start` of that container that finds the user made.
      await t.gateway.lifecycle.preparedAhead();
      const [madeAhead] = (await labelled(host.id)).containers;
      assert.equal(madeAhead?.State, 'exited');
      const setUp = await exec('docker', ['logs', `ccp-ws-${host.id}`]);
      assert.match(setUp.stdout + setUp.stderr, /created user dora/);

      const started = await waitTask(
        (await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id,
      );
      assert.equal(started.status, 'succeeded', JSON.stringify(started.error));
      assert.equal(
        (await docker.getContainer(`ccp-ws-${host.id}`).inspect()).Id,
        madeAhead.Id,
        'the start started the workspace made ahead',
      );
      assert.match(started.message, new RegExp(lab.exits[0]!.address.replaceAll('.', '\\.')));
      const running = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body;
      assert.equal(running.status, 'running');
      assert.equal(running.image, await expectedImageTag('workspace', 'test'));
      const { containers } = await labelled(host.id);
      assert.equal(containers.filter((c) => c.State === 'running').length, 2);

      const workspace = `ccp-ws-${host.id}`;
      await exec('docker', ['exec', '--user', 'dora', workspace, 'sh', '-c', 'echo kept > ~/note.txt']);
      const rebuild = await t.request('POST', `/v1/user/hosts/${host.id}/rebuild`, { token: user.token });
      assert.equal((await waitTask(rebuild.body.task_id)).status, 'succeeded');
      assert.equal((await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'running');
      const note = await exec('docker', ['exec', '--user', 'dora', workspace, 'cat', '/home/dora/note.txt']);
      assert.equal(note.stdout.trim(), 'kept');

      const stopped = await waitTask(
        (await t.request('POST', `/v1/admin/hosts/${host.id}/stop`)).body.task_id,
      );
      assert.equal(stopped.status, 'succeeded');
      assert.equal((await labelled(host.id)).containers.filter((c) => c.State === 'running').length, 0);

      assert.equal((await t.request('DELETE', `/v1/admin/hosts/${host.id}`)).status, 204);
      const left = await labelled(host.id);
      assert.deepEqual([left.containers.length, left.volumes.length], [0, 0]);
    });

    it('fails the start with a precise error and leaves nothing running when the exit IP is wrong', async () => {
      const user = await t.createUser('eve');
      const wrong = await t.request('POST', '/v1/admin/egress-ips', {
        body: {
          label: 'wrong exit',
          ip_address: lab.exits[1]!.address,
          proxy_config: lab.exits[0]!.variants['socks-auth'].proxyConfig,
        },
      });
      const host = (
        await t.request('POST', '/v1/admin/hosts', {
          body: { user_id: user.id, egress_ip_id: wrong.body.id },
        })
      ).body;
      created.push(host.id);
      const task = await waitTask((await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id);
      assert.equal(task.status, 'failed');
      assert.equal(task.error.code, 'exit_ip_mismatch');
      const details = (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body;
      assert.equal(details.status, 'failed');
      assert.equal((await labelled(host.id)).containers.filter((c) => c.State === 'running').length, 0);
    });

    it('ends a start waiting on an upstream that never answers when the host is stopped, leaving nothing it made', async () => {
      const user = await t.createUser('gus');
      const silent = await t.request('POST', '/v1/admin/egress-ips', {
        body: {
          label: 'silent upstream',
          ip_address: lab.exits[0]!.address,
          // A lab address that drops every packet: the start's path check waits on it for many seconds.
          proxy_config: { ...lab.exits[0]!.variants['socks-auth'].proxyConfig, server: '203.0.113.59' },
        },
      });
      const host = (
        await t.request('POST', '/v1/admin/hosts', {
          body: { user_id: user.id, egress_ip_id: silent.body.id },
        })
      ).body;
      created.push(host.id);
      // Made with the host, ahead of its first start: its workspace container (set up, not running) and volumes.
      await t.gateway.lifecycle.preparedAhead();
      const madeAhead = await labelled(host.id);
      assert.deepEqual(
        madeAhead.containers.map((c) => [c.Names[0], c.State]),
        [[`/ccp-ws-${host.id}`, 'exited']],
      );
      const start = (await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id;
      const stage = async () => (await t.request('GET', `/v1/admin/tasks/${start}`)).body.stage as string;
      for (let waited = 0; !(await stage()).startsWith('verifying the path'); waited += 100) {
        assert.ok(waited < 60_000, `the start never reached the path check (${await stage()})`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }

      const began = Date.now();
      const stop = await t.request('POST', `/v1/admin/hosts/${host.id}/stop`);
      const took = Date.now() - began;
      assert.equal(stop.status, 202, JSON.stringify(stop.body));
      assert.ok(took < 5000, `the stop answered after ${took} ms`);
      assert.equal((await waitTask(stop.body.task_id)).status, 'succeeded');
      const cancelled = (await t.request('GET', `/v1/admin/tasks/${start}`)).body;
      assert.equal(cancelled.status, 'failed');
      assert.equal(cancelled.error.code, 'cancelled');
      assert.equal((await t.request('GET', `/v1/admin/hosts/${host.id}`)).body.status, 'stopped');
      // What the start made (its egress gateway, files) is gone; what the host had is as it was, not running.
      const left = await labelled(host.id);
      assert.deepEqual(
        left.containers.map((c) => [c.Id, c.State]),
        madeAhead.containers.map((c) => [c.Id, 'exited']),
      );
      assert.deepEqual(left.volumes.map((v) => v.Name).sort(), madeAhead.volumes.map((v) => v.Name).sort());
    });

    it('marks a running host failed when its egress gateway is stopped behind its back, and starts it again', async () => {
      const user = await t.createUser('hank');
      const host = (
        await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: egressIpId } })
      ).body;
      created.push(host.id);
      const started = (await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id;
      assert.equal((await waitTask(started)).status, 'succeeded');
      const [gateway] = (await labelled(host.id)).containers.filter(
        (c) => c.Labels['cloud-cli-proxy.role'] === 'egress-gateway',
      );
      assert.ok(gateway, 'the host has an egress gateway container');
      // `docker stop` is an operator's: the restart policy leaves the container stopped.
      await docker.getContainer(gateway.Id).stop({ t: 1 });
      const status = async () => (await t.request('GET', `/v1/admin/hosts/${host.id}`)).body;
      for (let waited = 0; (await status()).status === 'running'; waited += 200) {
        assert.ok(waited < 15_000, 'the host still reads running 15 s after its egress gateway stopped');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const failed = await status();
      assert.equal(failed.status, 'failed');
      assert.match(
        failed.last_error,
        /^workspace_lost: its workspace was (broken|stopped) at two checks in a row/,
      );
      const events = (await t.request('GET', `/v1/admin/events?type=host.failed&host_id=${host.id}`)).body
        .events;
      assert.equal(events[0].data.code, 'workspace_lost');
      assert.equal(
        (await labelled(host.id)).containers.filter((c) => c.State === 'running').length,
        0,
        'what was left of it is stopped',
      );
      const again = (await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id;
      assert.equal((await waitTask(again)).status, 'succeeded');
      assert.equal((await status()).status, 'running');
    });

    it("removes a deleted user's workspaces with their volumes", async () => {
      const user = await t.createUser('frank');
      const host = (
        await t.request('POST', '/v1/admin/hosts', { body: { user_id: user.id, egress_ip_id: egressIpId } })
      ).body;
      created.push(host.id);
      assert.equal(
        (await waitTask((await t.request('POST', `/v1/admin/hosts/${host.id}/start`)).body.task_id)).status,
        'succeeded',
      );
      assert.equal((await t.request('DELETE', `/v1/admin/users/${user.id}`)).status, 204);
      const left = await labelled(host.id);
      assert.deepEqual([left.containers.length, left.volumes.length], [0, 0]);
    });
  });
}
