import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { locateV2ray, run, type V2rayBinary } from './v2ray-binary.js';
import { gatewayParams, testParams, VARIANTS } from './variants.js';

describe('v2ray 4.34 accepts every rendered config', { skip: needs('v2ray') }, () => {
  let binary: V2rayBinary;
  let v2ray = '';

  before(async () => {
    binary = await locateV2ray();
    v2ray = binary.path;
  });

  after(() => binary?.dispose());

  const check = async (config: string) => {
    const result = await run(v2ray, v2rayEngine.checkArgs, config);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /Configuration OK/);
  };

  for (const { name, upstream } of VARIANTS) {
    it(name, async () => {
      await check(v2rayEngine.renderGatewayConfig(gatewayParams(upstream)));
      await check(v2rayEngine.renderTestConfig(testParams(upstream, 'socks')));
      await check(v2rayEngine.renderTestConfig(testParams(upstream, 'http')));
    });
  }

  it('with an enforced egress policy', async () => {
    const upstream = VARIANTS[0]!.upstream;
    await check(
      v2rayEngine.renderGatewayConfig({
        ...gatewayParams(upstream),
        policy: {
          mode: 'enforce',
          default_action: 'deny',
          rules: [
            { action: 'deny', domain: 'ads.example.com' },
            { action: 'allow', domain: '*.example.com', port: '443' },
            { action: 'allow', address: '203.0.113.0/24' },
            { action: 'allow', port: '8000-8999' },
          ],
        },
      }),
    );
  });

  it('rejects what it cannot run, so the check above means something', async () => {
    const ss = VARIANTS.find((v) => v.name === 'shadowsocks-aes-128-gcm');
    assert.ok(ss);
    const config = v2rayEngine
      .renderTestConfig(testParams(ss.upstream, 'socks'))
      .replace('"aes-128-gcm"', '"2022-blake3-aes-128-gcm"');
    assert.match(config, /2022-blake3/);
    const result = await run(v2ray, v2rayEngine.checkArgs, config);
    assert.notEqual(result.code, 0, result.output);
  });
});
