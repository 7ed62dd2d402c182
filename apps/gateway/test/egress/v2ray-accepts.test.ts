import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { needs } from '../../../../test/support/needs.js';
import { DECISION_LOG_PATH } from '../../src/egress/v2ray-decisions.js';
import { v2rayEngine } from '../../src/egress/v2ray-engine.js';
import { locateV2ray, run, type V2rayBinary } from './v2ray-binary.js';
import { gatewayParams, testParams, VARIANTS } from './variants.js';

describe('v2ray 4.34 accepts every rendered config', { skip: needs('v2ray') }, () => {
  let binary: V2rayBinary;
  let v2ray = '';
  let logDir = '';

  before(async () => {
    binary = await locateV2ray();
    v2ray = binary.path;
    logDir = await mkdtemp(path.join(tmpdir(), 'ccp-v2ray-log-'));
  });

  after(async () => {
    await binary?.dispose();
    if (logDir) await rm(logDir, { recursive: true, force: true });
  });

  const check = async (config: string) => {
    // A check opens the log the config names: here, not in this machine's /tmp.
    const logged = config.replaceAll(DECISION_LOG_PATH, path.join(logDir, 'decisions.log'));
    const result = await run(v2ray, v2rayEngine.checkArgs, logged);
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

  for (const mode of ['enforce', 'log-only'] as const)
    it(`with an egress policy in ${mode} mode (its decisions logged)`, async () => {
      const upstream = VARIANTS[0]!.upstream;
      await check(
        v2rayEngine.renderGatewayConfig({
          ...gatewayParams(upstream),
          policy: {
            mode,
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
