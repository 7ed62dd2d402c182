import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Node } from '@ccp/api';
import { nodeChoice } from '../src/node-choice.js';

const node = (overrides: Partial<Node>): Node => ({
  name: 'east-1',
  state: 'up',
  internal_address: '10.0.0.11:7443',
  memory_mb: 32_000,
  cpus: 8,
  max_hosts: 50,
  hosts: 12,
  running: 4,
  images_ready: true,
  started_at: '2026-01-01T00:00:00Z',
  heartbeat_at: '2026-01-01T00:10:00Z',
  ...overrides,
});

describe('the node choices of the new-host form', () => {
  it('names each node with its hosts and capacity', () => {
    assert.deepEqual(nodeChoice(node({})), { label: 'east-1 (12/50 hosts)', disabled: false });
  });

  it('says when a node has no images yet, and still offers it', () => {
    assert.deepEqual(nodeChoice(node({ images_ready: false })), {
      label: 'east-1 (12/50 hosts, images not built)',
      disabled: false,
    });
  });

  it('offers a full node (a pinned host goes past NODE_MAX_HOSTS)', () => {
    assert.equal(nodeChoice(node({ hosts: 50 })).disabled, false);
  });

  it('lists a node that is not heartbeating but does not let it be chosen', () => {
    assert.deepEqual(nodeChoice(node({ state: 'unavailable' })), {
      label: 'east-1 (12/50 hosts, unavailable)',
      disabled: true,
    });
  });
});
