import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { renderUplinkGuard, type UplinkGuardParams } from '../../src/egress/uplink-guard.js';

const params: UplinkGuardParams = {
  table: 'ccp_uplink_h-1.test',
  device: 'veth1a2b3c4',
  mac: '02:42:AC:12:00:05',
  address: '172.18.0.5',
  policy: {
    upstream: { address: '198.51.100.21', port: 1081, protocols: ['tcp', 'udp'] },
    relay: { client: '172.18.0.1', ports: [22, 6080] },
  },
};

const lines = (text: string) => text.split('\n').map((line) => line.trim());

describe('the host-side guard on an egress gateway uplink', () => {
  it('drops by default, on the host end of the gateway veth, and replaces itself in one transaction', () => {
    const text = lines(renderUplinkGuard(params));
    assert.deepEqual(text.slice(1, 4), [
      'table netdev ccp_uplink_h-1.test',
      'delete table netdev ccp_uplink_h-1.test',
      'table netdev ccp_uplink_h-1.test {',
    ]);
    assert.ok(text.includes('type filter hook ingress device "veth1a2b3c4" priority -500; policy drop;'));
  });

  it("lets out only the gateway's own MAC and address, to the upstream, and the relay's replies", () => {
    const text = lines(renderUplinkGuard(params));
    const rules = text.slice(
      text.indexOf('type filter hook ingress device "veth1a2b3c4" priority -500; policy drop;') + 1,
      -3,
    );
    assert.deepEqual(rules, [
      'ether saddr != 02:42:ac:12:00:05 drop',
      'arp saddr ether 02:42:ac:12:00:05 arp saddr ip 172.18.0.5 accept',
      'ip saddr != 172.18.0.5 drop',
      'ip daddr 198.51.100.21 tcp dport 1081 accept',
      'ip daddr 198.51.100.21 udp dport 1081 accept',
      'ip daddr 172.18.0.1 tcp sport { 22, 6080 } tcp flags & (syn | ack) != syn accept',
    ]);
  });

  it('a TCP-only upstream gets no UDP', () => {
    const text = renderUplinkGuard({
      ...params,
      policy: { ...params.policy, upstream: { ...params.policy.upstream, protocols: ['tcp'] } },
    });
    assert.doesNotMatch(text, /udp/);
  });

  it('refuses values that are not plainly what they should be', () => {
    const bad: [string, Partial<UplinkGuardParams>, RegExp][] = [
      ['device with a quote', { device: 'veth"; accept' }, /device is not a valid interface name/],
      ['table with a space', { table: 'ccp uplink' }, /not a valid nftables name/],
      ['MAC', { mac: '02:42:ac:12:00' }, /mac is not a MAC address/],
      ['address', { address: 'fd00::5' }, /address must be an IPv4 address/],
      [
        'IPv6 upstream',
        { policy: { ...params.policy, upstream: { address: '2001:db8::1', port: 443, protocols: ['tcp'] } } },
        /upstream.address must be an IPv4 address on the uplink/,
      ],
      [
        'no relay port',
        { policy: { ...params.policy, relay: { client: '172.18.0.1', ports: [] } } },
        /relay.ports is empty/,
      ],
      [
        'port 0',
        { policy: { ...params.policy, upstream: { address: '198.51.100.21', port: 0, protocols: ['tcp'] } } },
        /upstream.port must be a port number/,
      ],
    ];
    for (const [what, change, message] of bad)
      assert.throws(() => renderUplinkGuard({ ...params, ...change }), message, what);
  });

  it('nftables accepts it', { skip: needs('nft') }, () => {
    // `lo` exists everywhere; older kernels refuse an ingress hook on a device that does not.
    const ruleset = renderUplinkGuard({ ...params, device: 'lo' });
    const result = spawnSync('nft', ['-c', '-f', '/dev/stdin'], { input: ruleset, encoding: 'utf8' });
    assert.equal(result.status, 0, result.stderr);
  });
});
