#!/usr/bin/env node
import { Command, CommanderError, Option } from 'commander';
import { runAttach, runConfigShow, runInit, runSessions } from './commands.js';
import { MOUNT_MODES } from './config.js';
import { runDoctor } from './doctor.js';
import { ConfigError, exitCodeOf } from './errors.js';
import { runExtend } from './extend.js';
import { red } from './terminal.js';
import { VERSION } from './version.js';

const program = new Command('ccp')
  .description(
    'Work in your cloud-cli-proxy workspace from your project folder: tmux sessions, the folder mounted at the same path, local git, reconnects.',
  )
  .version(VERSION, '-V, --version')
  .showHelpAfterError()
  .exitOverride();

const attachOptions = (command: Command) =>
  command
    .option('--new-session', "start a new tmux session instead of attaching to the folder's session")
    .option('--take-over', 'detach the other clients of the session (they are told first)')
    .option('-s, --session <name>', 'the tmux session to attach to (default: one per local folder)')
    .addOption(
      new Option('--mount-mode <mode>', 'how the local folder appears in the workspace').choices(MOUNT_MODES),
    )
    .option(
      '--session-command <command>',
      'the command a new session runs (overrides session_command; default claude)',
    )
    .option('--wait <seconds>', 'how long to wait for a stopped host to start', '600')
    .argument('[args...]', 'passed to the session command (put them after --)')
    .action(async (args: string[], options) => {
      process.exitCode = await runAttach(args, options);
    });

attachOptions(
  program
    .command('attach', { isDefault: true })
    .description('connect (starting the host if needed) and attach to the tmux session; the default command'),
);

program
  .command('init')
  .alias('login')
  .description(
    'check the gateway URL, the host short ID and the password with the gateway, then store them in the config file (the password only if asked)',
  )
  .option('--gateway <url>', 'the gateway URL, e.g. https://gateway.example.com:8080')
  .option('--short-id <id>', "the host's short ID")
  .option('--save-password', 'also store the password (asked on the terminal, or CCP_PASSWORD)')
  .option('--session-command <command>', 'the command new sessions run (session_command; default claude)')
  .action(async (options) => {
    await runInit(options);
  });

program
  .command('sessions')
  .description('list the tmux sessions of the workspace: name, creation time, attached clients, windows')
  .option('--json', 'print JSON')
  .option('--wait <seconds>', 'how long to wait for a stopped host to start', '600')
  .action(async (options) => {
    await runSessions(options);
  });

program
  .command('extend')
  .description(
    "keep the host running past its lifecycle policy's next stop (idle, maximum lifetime, schedule), which the gateway warns of",
  )
  .option('--seconds <n>', "how long past the planned stop (default: the gateway's HOST_EXTEND_SECONDS)")
  .action(async (options) => {
    await runExtend(options);
  });

program
  .command('doctor')
  .description(
    'check what ccp needs (terminal, config, gateway and its port, short ID and password, host, tmux, folder mount, local git) and say what to do',
  )
  .action(async () => {
    process.exitCode = await runDoctor();
  });

program
  .command('config')
  .description('check the config file and print the settings in effect (never the password)')
  .option('--json', 'print JSON')
  .action((options) => {
    runConfigShow(options);
  });

try {
  await program.parseAsync(process.argv);
} catch (error) {
  let failure = error;
  if (error instanceof CommanderError) {
    // Help and version end with 0; any other usage error is a configuration error.
    if (error.exitCode === 0) process.exit(0);
    failure = new ConfigError(error.message);
  } else {
    process.stderr.write(`${red(`ccp: ${(error as Error).message}`)}\n`);
  }
  process.exit(exitCodeOf(failure));
}
// Handles that outlive the command (ssh2 timers, the proxy agent) must not hold the exit.
process.exit(process.exitCode ?? 0);
