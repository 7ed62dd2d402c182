/**
 * Issue 30, what was blocked: the decisions come from v2ray's info log, whose detour lines carry the name the
 * workspace asked for (TLS SNI, HTTP Host) in bytes of its choosing. Only plausible destinations count.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkedDestination, parseV2rayDecisions } from '../../src/egress/v2ray-decisions.js';

const readAt = new Date('2026-11-26T21:10:30Z');
const detour = (tag: string, target: string, time = '21:10:05') =>
  `2026/11/26 ${time} [Info] [2532005848] v2ray.com/core/app/dispatcher: taking detour [${tag}] for [${target}]`;

describe('the egress policy decisions in v2ray 4.34 log', () => {
  it('counts detours to the policy tags per minute, decision, destination and port, with the last seen', () => {
    const text = [
      '2026/11/26 21:10:03 [Warning] v2ray.com/core: V2Ray 4.34.0 started',
      '2026/11/26 21:10:05 [Info] [2532005848] v2ray.com/core/app/dispatcher: sniffed domain: bad.test',
      detour('policy-blocked', 'tcp:bad.test:443'),
      detour('policy-blocked', 'tcp:BAD.test:443', '21:10:07'),
      detour('policy-blocked', 'tcp:bad.test:80'),
      detour('policy-would-block', 'tcp:meh.test:443', '21:11:01'),
      detour('policy-would-block', 'udp:203.0.113.9:53'),
      detour('policy-blocked', 'tcp:[2001:db8::1]:443'),
      detour('proxy', 'tcp:fine.test:443'),
      '2026/11/26 21:10:08 [Info] [1662969280] v2ray.com/core/app/dispatcher: default route for tcp:127.0.0.1:80',
      '',
    ].join('\n');
    const read = parseV2rayDecisions(text, readAt);
    assert.equal(read.refused, 0);
    assert.deepEqual(
      read.counts.map((c) => [c.minute, c.decision, c.destination, c.port, c.count, c.lastSeen]),
      [
        ['2026-11-26T21:10:00.000Z', 'blocked', 'bad.test', 443, 2, '2026-11-26T21:10:07.000Z'],
        ['2026-11-26T21:10:00.000Z', 'blocked', 'bad.test', 80, 1, '2026-11-26T21:10:05.000Z'],
        ['2026-11-26T21:11:00.000Z', 'would_block', 'meh.test', 443, 1, '2026-11-26T21:11:01.000Z'],
        ['2026-11-26T21:10:00.000Z', 'would_block', '203.0.113.9', 53, 1, '2026-11-26T21:10:05.000Z'],
        ['2026-11-26T21:10:00.000Z', 'blocked', '2001:db8::1', 443, 1, '2026-11-26T21:10:05.000Z'],
      ],
    );
  });

  it('refuses hostile names, and lines the workspace made up that a connection could not have made', () => {
    const long = `${'a'.repeat(63)}.`.repeat(4).concat('test');
    const hostile = [
      'bad test.example', // a space
      'evil.test]  for [tcp:x', // brackets to confuse the parser
      'ev\u0007il.test', // a control character
      'ex\u00e4mple.test', // not ASCII
      '<script>.test',
      `${'a'.repeat(64)}.test`, // a label too long
      long, // a name too long
      '-lead.test',
      'dot..test',
      '$(reboot).test',
      "o'reilly.test",
      '../../etc/passwd',
      '',
    ];
    const lines = hostile.map((name) => detour('policy-blocked', `tcp:${name}:443`));
    lines.push(detour('policy-blocked', 'tcp:ok.test:99999')); // no such port
    lines.push(detour('policy-blocked', `tcp:ok.test:443`, '25:99:99')); // no such time
    lines.push(detour('policy-blocked', 'tcp:ok.test:443').replace('2026/11/26', '2031/01/01')); // far from now
    lines.push(detour('policy-blocked', 'tcp:ok.test:443').replace('2026/11/26', '2026/11/26 ')); // odd spacing
    lines.push(`${detour('policy-blocked', 'tcp:ok.test:443')} trailing`);
    lines.push(detour('policy-blocked', `tcp:${'x'.repeat(5000)}.test:443`)); // a line too long to read
    lines.push(detour('policy-allowed', 'tcp:ok.test:443').replace('allowed', '-allowed')); // not a tag of ours
    // An SNI with a newline can split a line: the part after it stands as a line of its own.
    lines.push(
      `${detour('policy-blocked', 'tcp:split')}\n${detour('policy-blocked', 'tcp:made-up.test:443')}`,
    );
    const read = parseV2rayDecisions(lines.join('\n'), readAt);
    assert.deepEqual(
      read.counts.map((c) => c.destination),
      ['made-up.test'],
      'only the whole line a connection could also have made',
    );
    assert.equal(read.refused, lines.length, 'every other line of ours refused and counted');
  });

  it('takes names, IPv4 and bracketed IPv6, lower-cased; refuses the rest', () => {
    assert.equal(checkedDestination('API.Example.COM'), 'api.example.com');
    assert.equal(checkedDestination('_dmarc.example.com'), '_dmarc.example.com');
    assert.equal(checkedDestination('localhost'), 'localhost');
    assert.equal(checkedDestination('198.51.100.7'), '198.51.100.7');
    assert.equal(checkedDestination('[2001:DB8::7]'), '2001:db8::7');
    for (const bad of ['2001:db8::7', '[nope]', 'a b', 'a\nb', 'x.test.', '*.example.com', 'a/b'])
      assert.equal(checkedDestination(bad), null, bad);
  });
});
