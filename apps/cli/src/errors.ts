/**
 * The failures the CLI ends with, one class per exit code. The code is decided here, by type, and nowhere
 * else: a message's wording never changes how the program ends.
 */
export abstract class CliError extends Error {
  abstract readonly exitCode: number;
}

/** Wrong password, disabled or expired account, unknown host: exit 1. */
export class AuthError extends CliError {
  readonly exitCode = 1;
}

/** The gateway or the SSH proxy cannot be reached, answered with a server error, or the link died: exit 2. */
export class NetworkError extends CliError {
  readonly exitCode = 2;
}

/** The host did not become ready in time: exit 3. */
export class StartTimeoutError extends CliError {
  readonly exitCode = 3;
}

/** The configuration file, a flag or the local machine is not usable as given: exit 4. */
export class ConfigError extends CliError {
  readonly exitCode = 4;
}

/** The session command ended with a failure status, and the session with it: exit 5. */
export class SessionCommandError extends CliError {
  readonly exitCode = 5;
}

/** The host was stopped (by an administrator, a schedule or its owner elsewhere) while connected: exit 6. */
export class HostStoppedError extends CliError {
  readonly exitCode = 6;
}

/** The exit code for anything thrown: ours by type; anything else is a bug (70, EX_SOFTWARE), never 1–4. */
export function exitCodeOf(error: unknown): number {
  if (error instanceof CliError) return error.exitCode;
  return 70;
}
