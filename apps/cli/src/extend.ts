import type { ErrorBody, Host, LoginResponse } from '@ccp/api';
import { loadConfig } from './config.js';
import { AuthError, ConfigError, NetworkError } from './errors.js';
import { checkHost } from './gateway-checks.js';
import { getJson, postJson } from './http.js';
import { readSecret } from './terminal.js';

/** `--seconds`: a whole number of seconds, when given (the gateway's HOST_EXTEND_SECONDS otherwise). */
function secondsFlag(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new ConfigError(`--seconds must be a whole number of seconds, 1 or more (got ${text})`);
  return value;
}

const said = (body: unknown) =>
  (body as Partial<ErrorBody> | null)?.error ? `: ${(body as ErrorBody).error}` : '';

/**
 * Keeps the host from its policy's next stop (idle, lifetime, schedule): the owner signs in to the API with the
 * host's password, as the dashboard does, and asks for the extension; prints until when it holds.
 */
export async function runExtend(flags: { seconds?: string }): Promise<void> {
  const seconds = secondsFlag(flags.seconds);
  const config = loadConfig();
  const password =
    config.password ??
    process.env.CCP_PASSWORD ??
    (await readSecret(`Password for host ${config.short_id}: `));
  if (!password)
    throw new ConfigError(
      'no password: run ccp in a terminal, set CCP_PASSWORD, or `ccp init --save-password`',
    );
  const { username } = await checkHost(config.gateway, config.short_id, password);
  const login = await postJson(`${config.gateway}/v1/auth/login`, { username, password });
  if (login.status !== 200) throw new AuthError(`signing in as ${username} failed${said(login.body)}`);
  const { token, role } = login.body as LoginResponse;
  const base = `${config.gateway}/v1/${role}/hosts`;
  const listed = await getJson(base, 30_000, token);
  const host = (listed.body as { hosts: Host[] } | null)?.hosts.find((h) => h.short_id === config.short_id);
  if (!host) throw new AuthError(`host ${config.short_id} is not among ${username}'s hosts`);
  const answer = await postJson(`${base}/${host.id}/extend`, seconds ? { seconds } : {}, 30_000, token);
  if (answer.status === 409)
    throw new ConfigError(`host ${config.short_id} is not running; nothing to extend${said(answer.body)}`);
  if (answer.status !== 200)
    throw new NetworkError(`the gateway answered HTTP ${answer.status}${said(answer.body)}`);
  const stop = (answer.body as Host).lifecycle.planned_stop;
  process.stdout.write(
    stop
      ? `host ${config.short_id} keeps running until at least ${stop.at} (then ${stop.reason}, after a warning)\n`
      : `host ${config.short_id} keeps running; its policy plans no stop\n`,
  );
}
