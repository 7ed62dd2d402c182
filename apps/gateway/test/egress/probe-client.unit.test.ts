import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import dnsPacket from 'dns-packet';

const exec = promisify(execFile);
const LOOPBACK = '127.0.0.1';
const ECHO_NAME = 'echo.probe.test';
const EXIT = '198.51.100.21';

/**
 * The path check's program imports the probe client with plain `node` inside a workspace's namespace, where
 * no tsx is loaded: here plain `node` loads it the same way and asks a local resolver and IP echo through it.
 */
describe('probe client, loaded by plain node as the path check loads it', () => {
  const resolver = dgram.createSocket('udp4');
  let lost = 0;
  const echo = http.createServer((request, response) => {
    response.end(request.headers.host === `${ECHO_NAME}:${port(echo)}` ? `ip=${EXIT}\n` : 'wrong host');
  });
  const port = (server: http.Server) => (server.address() as AddressInfo).port;

  before(async () => {
    resolver.on('message', (message, from) => {
      // The first question is lost, as the tunnel's DoH client sometimes loses one: the client asks again.
      if (lost++ === 0) return;
      const query = dnsPacket.decode(message);
      const reply = dnsPacket.encode({
        id: query.id,
        type: 'response',
        flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
        questions: query.questions,
        answers: [{ type: 'A', name: ECHO_NAME, data: LOOPBACK }],
      });
      resolver.send(reply, from.port, from.address);
    });
    await new Promise<void>((resolve) => resolver.bind(0, LOOPBACK, resolve));
    await new Promise<void>((resolve) => echo.listen(0, LOOPBACK, resolve));
  });

  after(() => {
    resolver.close();
    echo.close();
  });

  it('resolves the echo through the given resolver and reads its answer', async () => {
    const task = {
      client: import.meta.resolve('../../src/egress/probe-client.js'),
      dns: { address: LOOPBACK, port: resolver.address().port },
      url: `http://${ECHO_NAME}:${port(echo)}/trace`,
    };
    const program = `
      const task = JSON.parse(process.argv[1]);
      import(task.client).then(async (client) => {
        const address = await client.resolveIPv4(new URL(task.url).hostname, task.dns, 5000);
        const outcome = await client.getEcho(task.url, address, { caPem: null, timeoutMs: 5000 });
        process.stdout.write(JSON.stringify({ address, outcome, exit: client.parseEcho(outcome.body) }));
      });`;
    const { stdout } = await exec(process.execPath, ['-e', program, JSON.stringify(task)], {
      env: { PATH: process.env.PATH ?? '' },
    });
    assert.deepEqual(JSON.parse(stdout), {
      address: LOOPBACK,
      outcome: { url: task.url, status: 200, body: `ip=${EXIT}\n` },
      exit: EXIT,
    });
    assert.ok(lost >= 2, 'the lost question was asked again');
  });
});
