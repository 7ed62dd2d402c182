import type Docker from 'dockerode';
import { cappedOutput, EXEC_OUTPUT_CAP } from './capped-output.js';
import { type ExecResult, RuntimeError } from './workspace-runtime.js';

/** Who runs the command (root unless said), and what it finds in its environment besides the image's. */
export interface ExecAs {
  user?: string;
  env?: string[];
}

/**
 * Runs a command in a container and collects its output, each stream capped: past the cap it stops
 * reading rather than drain, since a command that prints without end would otherwise be read at full speed
 * until the timeout, for every call in parallel.
 */
export async function execCapped(
  docker: Docker,
  containerId: string,
  command: string[],
  timeoutMs: number,
  as: ExecAs = {},
): Promise<ExecResult> {
  const exec = await docker.getContainer(containerId).exec({
    Cmd: command,
    User: as.user ?? 'root',
    ...(as.env ? { Env: as.env } : {}),
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  const cut = () => stream.destroy();
  const stdout = cappedOutput(EXEC_OUTPUT_CAP, cut);
  const stderr = cappedOutput(EXEC_OUTPUT_CAP, cut);
  docker.modem.demuxStream(stream, stdout.sink, stderr.sink);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      stream.destroy();
      reject(
        new RuntimeError('exec_timeout', `\`${command.join(' ')}\` did not finish within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    stream.on('end', done);
    stream.on('close', done);
    stream.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  const flooded = stdout.truncated() ? 'stdout' : stderr.truncated() ? 'stderr' : null;
  if (flooded) {
    throw new RuntimeError(
      'exec_output_too_large',
      `\`${command.join(' ')}\` printed more than ${EXEC_OUTPUT_CAP} bytes on ${flooded}; the gateway stopped reading`,
    );
  }
  const { ExitCode } = await exec.inspect();
  return { exitCode: ExitCode ?? -1, stdout: stdout.text(), stderr: stderr.text() };
}
