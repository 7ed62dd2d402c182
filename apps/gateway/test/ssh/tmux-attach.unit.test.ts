import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseSessions } from '@ccp/api/tmux';
import { attachScript, scrollCommand } from '../../src/ssh/tmux-attach.js';
import { parseControl } from '../../src/ssh/web-terminal.js';

describe('the browser terminal: its tmux commands and the controls it takes', () => {
  it('attaches by default, refuses a new session under a name in use, detaches the others for a take-over', () => {
    assert.match(attachScript('web', 'attach'), /^exec tmux new-session -A -s web -c "\$PWD"$/m);
    const fresh = attachScript('web-0a1b2c', 'new');
    assert.match(fresh, /has-session -t web-0a1b2c .*exit 4/);
    assert.match(fresh, /^exec tmux new-session -s web-0a1b2c -c "\$PWD"$/m);
    const takeOver = attachScript('work', 'take_over');
    assert.match(takeOver, /detach-client -s work/);
    assert.match(takeOver, /exec tmux new-session -A -s work/);
    // A name is never spliced into the script unless it is a plain session name.
    for (const bad of ['a b', 'x;reboot', '$(id)', '', 'a'.repeat(65)])
      assert.throws(() => attachScript(bad, 'attach'), /not a session name/);
    assert.throws(() => scrollCommand('x;id', -3), /not a session name/);
  });

  it('scrolls back into copy mode and forward out of it, bounded', () => {
    assert.match(scrollCommand('web', -5), /copy-mode -e -t web .*-N 5 scroll-up/);
    assert.match(scrollCommand('web', 9999), /-N 500 scroll-down/);
  });

  it('reads tmux list-sessions, skipping lines that are not sessions', () => {
    assert.deepEqual(parseSessions('web\t1764150000\t1\t2\nnoise\n'), [
      { name: 'web', created_at: '2025-11-26T09:40:00Z', attached_clients: 1, windows: 2 },
    ]);
  });

  it('takes resize and scroll controls within bounds, and nothing else', () => {
    assert.deepEqual(parseControl('{"type":"resize","cols":52,"rows":49}'), {
      type: 'resize',
      cols: 52,
      rows: 49,
    });
    assert.deepEqual(parseControl('{"type":"scroll","lines":-3}'), { type: 'scroll', lines: -3 });
    for (const bad of [
      'not json',
      'null',
      '{"type":"resize","cols":0,"rows":24}',
      '{"type":"resize","cols":80.5,"rows":24}',
      '{"type":"resize","cols":100000,"rows":24}',
      '{"type":"scroll","lines":0}',
      '{"type":"exec","command":"id"}',
    ])
      assert.equal(parseControl(bad), null, bad);
  });
});
