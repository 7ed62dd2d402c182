import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HostStatus } from '@ccp/api';
import {
  type Action,
  type Desired,
  decide,
  desiredOf,
  type Observed,
  type Occasion,
} from '../../src/domain/hosts/reconcile-decision.js';

/** A local running host whose workspace runs on the upstream it should: nothing to do, whatever the occasion. */
const settled: Observed = {
  occasion: 'check',
  record: 'running',
  node: 'local',
  engine: 'running',
  busy: false,
  lostBefore: false,
  upstream: { active: { egressIpId: 'a', healthy: true }, inUse: 'a', matches: true },
};

type Row = [what: string, seen: Partial<Observed>, desired: Desired, action: Action['kind'] | Action];

const none = 'none';
const healthyB = { active: { egressIpId: 'b', healthy: true }, inUse: 'a', matches: true };

/** Every row of the decision, in the order `decide` reads them; the first that fits wins. */
const table: Row[] = [
  // What a delete owns, or a node that is gone, is never touched.
  ['a host being removed', { engine: 'stopped', lostBefore: true }, 'removed', none],
  [
    'a host whose node stopped heartbeating',
    { record: 'node_unavailable', node: 'unavailable' },
    'stopped',
    none,
  ],
  // Placed on another node.
  [
    'a switch for a running host on another node',
    { occasion: 'upstream-changed', node: 'elsewhere', engine: null },
    'running',
    'forward-switch',
  ],
  [
    'a switch for a stopped host on another node',
    { occasion: 'upstream-changed', node: 'elsewhere', record: 'stopped', engine: null },
    'stopped',
    none,
  ],
  [
    'start-up: this engine still runs a host moved away',
    { occasion: 'restart', node: 'elsewhere' },
    'running',
    'stop-stale',
  ],
  [
    'rejoin: this engine still runs a host moved away',
    { occasion: 'rejoin', node: 'elsewhere' },
    'running',
    'stop-stale',
  ],
  [
    'rejoin: an old workspace of a moved host, stopped',
    { occasion: 'rejoin', node: 'elsewhere', engine: 'stopped' },
    'running',
    none,
  ],
  [
    'rejoin: the engine did not answer for a moved host',
    { occasion: 'rejoin', node: 'elsewhere', engine: 'unreachable' },
    'running',
    none,
  ],
  [
    'the health round never touches a host elsewhere',
    { occasion: 'upstream-round', node: 'elsewhere', engine: null, upstream: healthyB },
    'running',
    none,
  ],
  // Here, the engine must answer for anything to be judged.
  ['start-up: the engine did not answer', { occasion: 'restart', engine: 'unreachable' }, 'running', none],
  ["rejoin: a host of this node is not the rejoin's", { occasion: 'rejoin' }, 'running', none],
  // Start-up: statuses written before the restart, against the engine.
  ['start-up: running and running', { occasion: 'restart' }, 'running', none],
  [
    'start-up: running, workspace stopped',
    { occasion: 'restart', engine: 'stopped' },
    'running',
    'settle-failed',
  ],
  [
    'start-up: running, workspace missing',
    { occasion: 'restart', engine: 'missing' },
    'running',
    'settle-failed',
  ],
  [
    'start-up: running, workspace broken',
    { occasion: 'restart', engine: 'broken' },
    'running',
    'settle-failed',
  ],
  [
    'start-up: stopping, workspace still running',
    { occasion: 'restart', record: 'stopping' },
    'stopped',
    'settle-stopped',
  ],
  [
    'start-up: stopping, workspace stopped',
    { occasion: 'restart', record: 'stopping', engine: 'stopped' },
    'stopped',
    'settle-stopped',
  ],
  [
    'start-up: starting, workspace stopped',
    { occasion: 'restart', record: 'starting', engine: 'stopped' },
    'running',
    'settle-stopped',
  ],
  [
    'start-up: rebuilding, workspace stopped',
    { occasion: 'restart', record: 'rebuilding', engine: 'stopped' },
    'stopped',
    'settle-stopped',
  ],
  [
    'start-up: starting, workspace half started',
    { occasion: 'restart', record: 'starting' },
    'running',
    'settle-failed',
  ],
  [
    'start-up: starting, workspace missing',
    { occasion: 'restart', record: 'starting', engine: 'missing' },
    'running',
    'settle-failed',
  ],
  [
    'start-up: rebuilding, workspace broken',
    { occasion: 'restart', record: 'rebuilding', engine: 'broken' },
    'stopped',
    'settle-failed',
  ],
  [
    'start-up: stopped stays stopped',
    { occasion: 'restart', record: 'stopped', engine: 'stopped' },
    'stopped',
    none,
  ],
  [
    'start-up: failed stays failed',
    { occasion: 'restart', record: 'failed', engine: 'missing' },
    'stopped',
    none,
  ],
  [
    'start-up: created stays created',
    { occasion: 'restart', record: 'created', engine: 'missing' },
    'stopped',
    none,
  ],
  // The periodic check of running hosts.
  ['check: a stopped host', { record: 'stopped', engine: 'stopped' }, 'stopped', none],
  ['check: a host with a task', { busy: true, engine: null }, 'running', none],
  ['check: running and running', {}, 'running', none],
  ['check: the engine was not asked', { engine: null }, 'running', none],
  ['check: not running for the first time', { engine: 'stopped' }, 'running', 'suspect'],
  ['check: missing for the first time', { engine: 'missing' }, 'running', 'suspect'],
  [
    'check: not running a second time in a row',
    { engine: 'stopped', lostBefore: true },
    'running',
    'fail-lost',
  ],
  ['check: broken a second time in a row', { engine: 'broken', lostBefore: true }, 'running', 'fail-lost'],
  ['check: running again after a first miss', { lostBefore: true }, 'running', none],
  // A binding or an egress IP changed: the active upstream is applied, whatever the round would say.
  [
    'change: a stopped host',
    { occasion: 'upstream-changed', record: 'stopped', engine: null },
    'stopped',
    none,
  ],
  [
    'change: no binding left',
    { occasion: 'upstream-changed', engine: null, upstream: { active: null, inUse: 'a', matches: true } },
    'running',
    none,
  ],
  [
    'change: a running host',
    { occasion: 'upstream-changed', engine: null, upstream: healthyB },
    'running',
    'switch-upstream',
  ],
  [
    'change: even onto an unhealthy upstream',
    {
      occasion: 'upstream-changed',
      engine: null,
      upstream: { active: { egressIpId: 'b', healthy: false }, inUse: null, matches: true },
    },
    'running',
    'switch-upstream',
  ],
  [
    'change: even what seems applied',
    { occasion: 'upstream-changed', engine: null },
    'running',
    'switch-upstream',
  ],
  // The egress health round.
  [
    'round: a stopped host',
    { occasion: 'upstream-round', record: 'stopped', engine: null, upstream: healthyB },
    'stopped',
    none,
  ],
  [
    'round: no binding',
    { occasion: 'upstream-round', engine: null, upstream: { active: null, inUse: null, matches: true } },
    'running',
    none,
  ],
  [
    'round: started before this gateway, healthy active',
    {
      occasion: 'upstream-round',
      engine: null,
      upstream: { active: { egressIpId: 'a', healthy: true }, inUse: null, matches: true },
    },
    'running',
    'switch-upstream',
  ],
  [
    'round: started before this gateway, nothing healthy',
    {
      occasion: 'upstream-round',
      engine: null,
      upstream: { active: { egressIpId: 'a', healthy: false }, inUse: null, matches: true },
    },
    'running',
    none,
  ],
  ['round: on its active upstream as applied', { occasion: 'upstream-round', engine: null }, 'running', none],
  [
    'round: on its active egress IP, an old config or a reverted switch',
    {
      occasion: 'upstream-round',
      engine: null,
      upstream: { active: { egressIpId: 'a', healthy: true }, inUse: 'a', matches: false },
    },
    'running',
    'switch-upstream',
  ],
  [
    'round: another binding took over',
    { occasion: 'upstream-round', engine: null, upstream: healthyB },
    'running',
    { kind: 'failover', from: 'a', to: 'b' },
  ],
];

describe('the host reconciler decides', () => {
  for (const [what, seen, desired, expected] of table) {
    it(what, () => {
      const want = typeof expected === 'string' ? { kind: expected } : expected;
      assert.deepEqual(decide({ ...settled, ...seen }, desired), want);
    });
  }

  it('with every action and every occasion in the table', () => {
    const kinds = new Set(table.map(([, , , action]) => (typeof action === 'string' ? action : action.kind)));
    const all: Action['kind'][] = [
      'none',
      'suspect',
      'fail-lost',
      'settle-stopped',
      'settle-failed',
      'stop-stale',
      'forward-switch',
      'switch-upstream',
      'failover',
    ];
    assert.deepEqual([...kinds].sort(), [...all].sort());
    const occasions: Occasion[] = ['restart', 'check', 'rejoin', 'upstream-changed', 'upstream-round'];
    const seen = new Set(table.map(([, observed]) => observed.occasion ?? settled.occasion));
    assert.deepEqual([...seen].sort(), [...occasions].sort());
  });
});

describe('what a host should be, from its record', () => {
  const rows: [HostStatus, Desired][] = [
    ['created', 'stopped'],
    ['starting', 'running'],
    ['running', 'running'],
    ['stopping', 'stopped'],
    ['stopped', 'stopped'],
    ['rebuilding', 'stopped'],
    ['failed', 'stopped'],
    ['node_unavailable', 'stopped'],
  ];
  for (const [record, desired] of rows) {
    it(`${record} → ${desired}`, () => assert.equal(desiredOf(record), desired));
  }
});
