import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig, saveConfig } from '../src/config.js';
import { AuthError, ConfigError, exitCodeOf, NetworkError, StartTimeoutError } from '../src/errors.js';
import { VERSION } from '../src/version.js';

describe('the config file', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ccp-cli-config-'));
  const file = path.join(dir, 'config.yaml');
  const write = (text: string) => writeFileSync(file, text);
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('fills the documented defaults; proxy_commands absent is [git], an explicit [] is off', () => {
    write('gateway: https://gw.example.com/\nshort_id: k3m9x2qa\n');
    const config = loadConfig(file);
    assert.equal(config.gateway, 'https://gw.example.com');
    assert.deepEqual(config.proxy_commands, ['git']);
    assert.equal(config.hot_sync_max_file_mb, 50);
    assert.deepEqual(config.hot_sync_ignore, ['.git', 'node_modules']);
    assert.equal(config.mount_mode, 'auto');
    assert.equal(config.session_command, 'claude');
    write('gateway: https://gw.example.com\nshort_id: k3m9x2qa\nproxy_commands: []\n');
    assert.deepEqual(loadConfig(file).proxy_commands, []);
    write('gateway: https://gw.example.com\nshort_id: k3m9x2qa\nhot_sync_ignore: [target, .venv]\n');
    assert.deepEqual(loadConfig(file).hot_sync_ignore, ['target', '.venv']);
  });

  it('reports every problem at once, naming the key, as a configuration error (exit 4)', () => {
    write(
      'gateway: ftp://x\nshort_id: nope\nproxy_commands: [git, "rm -rf"]\nhot_sync_max_file_mb: 0\nhot_sync_ignore: [a/b]\ncolour: red\n',
    );
    assert.throws(
      () => loadConfig(file),
      (error: Error) => {
        assert.ok(error instanceof ConfigError);
        for (const key of [
          'gateway:',
          'short_id:',
          'proxy_commands:',
          'hot_sync_max_file_mb:',
          'hot_sync_ignore:',
          'unknown key "colour"',
        ])
          assert.ok(error.message.includes(key), error.message);
        return true;
      },
    );
    write('gateway: [unclosed\n');
    assert.throws(() => loadConfig(file), ConfigError);
  });

  it('is written with mode 0600, and an explicit [] survives a save', () => {
    saveConfig({ gateway: 'https://gw.example.com', short_id: 'k3m9x2qa', proxy_commands: [] }, file);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.match(readFileSync(file, 'utf8'), /proxy_commands: \[\]/);
    assert.deepEqual(loadConfig(file).proxy_commands, []);
  });
});

describe('exit codes', () => {
  it('are decided by the error type', () => {
    assert.equal(exitCodeOf(new AuthError('x')), 1);
    assert.equal(exitCodeOf(new NetworkError('x')), 2);
    assert.equal(exitCodeOf(new StartTimeoutError('x')), 3);
    assert.equal(exitCodeOf(new ConfigError('x')), 4);
    assert.equal(exitCodeOf(new Error('wrong password')), 70, 'message text never decides');
  });

  it('--version is the package version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    assert.equal(VERSION, pkg.version);
  });
});
