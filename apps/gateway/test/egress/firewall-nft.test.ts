import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { renderGatewayFirewall } from '../../src/egress/gateway-firewall.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { VARIANTS } from './variants.js';

// `nft -c` asks the kernel to check the ruleset without applying it; that needs nftables and CAP_NET_ADMIN.
const skip = needs('nft');

describe('nftables accepts the rendered kill switch', { skip }, () => {
  for (const name of ['vmess-ws-tls', 'shadowsocks-aes-256-gcm']) {
    it(name, () => {
      const variant = VARIANTS.find((v) => v.name === name);
      assert.ok(variant);
      const ruleset = renderGatewayFirewall({
        table: 'ccp_egress_check',
        workspaceInterface: 'eth1',
        uplinkInterface: 'eth0',
        upstream: v2rayEngine.upstreamEndpoint(variant.upstream),
        socketMark: 0xff,
        tproxyMark: 0x1,
        transparentPort: 12345,
        dnsPort: 53,
      });
      const result = spawnSync('nft', ['-c', '-f', '/dev/stdin'], { input: ruleset, encoding: 'utf8' });
      assert.equal(result.status, 0, result.stderr);
    });
  }
});
