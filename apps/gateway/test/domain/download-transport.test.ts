import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { transportOf } from '@ccp/api';
import {
  passwordInTheClearWarning,
  plainHttpNotice,
  plainHttpWarning,
} from '../../src/domain/entry/download-transport.js';

describe('how a PUBLIC_API_URL carries what users install', () => {
  it('counts only this machine as safe without TLS: a LAN or public address is a network path', () => {
    const cases: [string, string][] = [
      ['https://gw.example.com', 'https'],
      ['https://127.0.0.1:8443', 'https'],
      ['http://localhost:8080', 'loopback'],
      ['http://127.0.0.1:8080', 'loopback'],
      ['http://127.9.8.7', 'loopback'],
      ['http://[::1]:8080', 'loopback'],
      ['http://LOCALHOST:8080', 'loopback'],
      ['http://127.1:8080', 'loopback'],
      ['http://[0:0:0:0:0:0:0:1]', 'loopback'],
      ['http://[::ffff:127.0.0.1]', 'loopback'],
      ['http://[::ffff:192.0.2.7]', 'plain_http'],
      ['http://gw.example.com:8080', 'plain_http'],
      ['http://192.168.1.20:8080', 'plain_http'],
      ['http://10.0.0.5', 'plain_http'],
      ['http://[2001:db8::1]:8080', 'plain_http'],
      ['http://localhost.example.com', 'plain_http'],
    ];
    for (const [url, transport] of cases) assert.equal(transportOf(url), transport, url);
  });

  it('words a warning for users and a notice for the administrator only for plain HTTP', () => {
    assert.equal(plainHttpWarning('https://gw.example.com'), null);
    assert.equal(plainHttpNotice('http://localhost:8080'), null);
    assert.match(
      plainHttpWarning('http://192.0.2.7:8080') ?? '',
      /over plain HTTP \(http:\/\/192\.0\.2\.7:8080\)/,
    );
    assert.match(plainHttpNotice('http://192.0.2.7:8080') ?? '', /deploy\/nginx\.conf.*https:\/\//);
  });

  it('warns about a password when the script comes or the password goes in the clear, naming that address', () => {
    assert.equal(passwordInTheClearWarning('The access command', ['https://gw.example.com']), null);
    assert.equal(
      passwordInTheClearWarning('The access command', ['http://localhost', 'http://127.0.0.1:8080']),
      null,
    );
    assert.match(
      passwordInTheClearWarning('The access command', ['https://gw.example.com', 'http://192.0.2.7:8080']) ??
        '',
      /^The access command goes over plain HTTP \(http:\/\/192\.0\.2\.7:8080\): anyone on the network path can read the password it sends or replace the script it runs\..*behind TLS \(https\)\.$/,
    );
  });
});
