import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { labUnavailable } from '../../../../test/lab/lab.js';
import { needs } from '../../../../test/support/needs.js';
import { type LabGateway, startLabGateway } from '../helpers/lab-gateway.js';
import { sshWithPassword, within } from '../helpers/openssh.js';

const CLIENTS = 5000;
/** The gateway's bound on the tmux clients a host's warning goes to (MAX_TOLD_CLIENTS in workspace-activity.ts). */
const TOLD_AT_MOST = 16;
/** A round over two hosts on a loaded machine: a few dozen `docker exec`s, not thousands. */
const PROMPT_MS = 45_000;

/**
 * A tmux that answers `list-clients` with thousands of made-up clients and notes each message it is asked to show
 * (anything else goes to the real one). Installed by the workspace's root ahead of it in PATH: the workspace is
 * the user's, and so is every answer the gateway reads from it.
 */
const FAKE_TMUX = `#!/bin/sh
case "$1" in
  list-clients) seq -f '/dev/pts/%g' 1 ${CLIENTS} ;;
  display-message) echo told >> /tmp/tmux-told ;;
  *) exec /usr/bin/tmux "$@" ;;
esac
`;

/**
 * Attack: a workspace makes its tmux list thousands of clients, so that warning it of a coming stop would run one
 * `tmux display-message` per client and hold the lifecycle round of every host of the node. The gateway tells a
 * bounded number of clients, and the round, the neighbour's warning with it, ends promptly.
 */
describe('a workspace whose tmux lists thousands of clients', {
  skip: labUnavailable() || needs('ssh', 'sshpass'),
  timeout: 600_000,
}, () => {
  const username = `flood${randomBytes(3).toString('hex')}`;
  let lab: LabGateway;
  let sshPass: string;
  const hosts: { neighbour?: { id: string; short_id: string }; hostile?: { id: string; short_id: string } } =
    {};

  const inWorkspace = async (shortId: string, command: string) => {
    const result = await sshWithPassword(
      lab.t.gateway.ssh.port,
      sshPass,
      [`${username}+${shortId}@127.0.0.1`, command],
      60_000,
    );
    assert.equal(result.code, 0, `${command}: ${result.stderr}`);
    return result.stdout;
  };
  const warnings = async (hostId: string) =>
    (await lab.t.request('GET', `/v1/admin/events?host_id=${hostId}&type=host.stop_warning`)).body.events;

  before(async () => {
    // Any stop within ten minutes is warned of at once; rounds run when the test says.
    lab = await startLabGateway({ HOST_STOP_WARNING_SECONDS: '600' });
    const user = await lab.t.createUser(username);
    sshPass = user.sshPass;
    // The neighbour is older: the round, newest first, comes to it after the hostile host.
    hosts.neighbour = await lab.createHost(user.id);
    hosts.hostile = await lab.createHost(user.id);
    for (const host of [hosts.neighbour, hosts.hostile]) {
      await within(300_000, 'the workspace start', lab.startHost(host.id));
      const set = await lab.t.request('PUT', `/v1/admin/hosts/${host.id}/lifecycle-policy`, {
        body: { idle_timeout_seconds: null, max_lifetime_seconds: 300, schedule: null },
      });
      assert.equal(set.status, 200, JSON.stringify(set.body));
    }
    const script = Buffer.from(FAKE_TMUX).toString('base64');
    await inWorkspace(
      hosts.hostile.short_id,
      `echo ${script} | base64 -d | sudo tee /usr/local/bin/tmux >/dev/null && sudo chmod 755 /usr/local/bin/tmux`,
    );
    assert.equal(
      (await inWorkspace(hosts.hostile.short_id, 'tmux list-clients | wc -l')).trim(),
      String(CLIENTS),
    );
  });
  after(async () => {
    await lab?.close();
  });

  it('the round warns both hosts promptly, and tells the flooding workspace a bounded number of clients', async () => {
    const began = Date.now();
    await within(PROMPT_MS, 'the lifecycle round', lab.t.gateway.lifecycleScheduler.round());
    const took = Date.now() - began;
    assert.equal((await warnings(hosts.neighbour!.id)).length, 1, 'the neighbour was warned');
    assert.equal((await warnings(hosts.hostile!.id)).length, 1, 'the flooding host was warned');
    const told = (await inWorkspace(hosts.hostile!.short_id, 'cat /tmp/tmux-told | wc -l')).trim();
    assert.equal(Number(told), TOLD_AT_MOST, `told ${told} of ${CLIENTS} clients, the round took ${took} ms`);
  });
});
