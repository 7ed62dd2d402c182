import path from 'node:path';
import { copyFromFolder, outsideFolder } from './folder-paths.js';
import {
  checkStrategy,
  checkStrategyOption,
  GIT_SUBCOMMANDS,
  gitSubcommand,
  type OptionRule,
  type SubcommandRule,
} from './git-allow-list.js';

/** A remote of the repository as it was on this machine when ccp started (never as the workspace left it). */
export interface RecordedRemote {
  fetchUrl: string;
  pushUrl: string;
}

export interface GitCall {
  cwd: string;
  root: string;
  /** The repository's remotes recorded when ccp started, by name; empty for a repository it did not see. */
  remotes: ReadonlyMap<string, RecordedRemote>;
  /** The user's proxy_git_signing: whether the workspace may sign with the user's key. */
  signing: boolean;
  /** A private folder for the copies of files git reads (commit -F). */
  scratch: string;
}

export interface CheckedArguments {
  /** Options before the command. */
  global: string[];
  command: string;
  /** What follows the command: options in one spelling each (`--name=value`, `-xvalue`), remotes as URLs. */
  rest: string[];
  /** Whether the workspace's stdin is handed to git (only for options that read it). */
  stdin: boolean;
}

/** Options before the git command that change nothing but output and pathspec matching. */
const GLOBAL_OPTIONS = new Set([
  '--no-pager',
  '-P',
  '--literal-pathspecs',
  '--glob-pathspecs',
  '--noglob-pathspecs',
  '--icase-pathspecs',
  '--no-optional-locks',
  '--no-replace-objects',
]);

type Part =
  | { kind: 'option'; name: string; value?: string }
  | { kind: 'word'; text: string }
  | { kind: 'end' };

const refused = (what: string, why: string) => `git ${what} is refused: ${why}`;

/** The checked, rewritten arguments of a git call from the workspace, or why it is refused. */
export function checkGitArguments(args: readonly string[], call: GitCall): CheckedArguments | string {
  let at = 0;
  const global: string[] = [];
  for (; at < args.length && args[at]?.startsWith('-'); at++) {
    const option = args[at] ?? '';
    if (!GLOBAL_OPTIONS.has(option)) {
      return refused(
        `option ${option}`,
        'options before the git command change its configuration, repository or programs; run it on your machine',
      );
    }
    global.push(option);
  }
  const command = args[at];
  if (command === undefined) return 'no git command given';
  const rule = gitSubcommand(command);
  if (!rule) {
    return `git ${command} is not run on your machine from the workspace; it runs: ${GIT_SUBCOMMANDS.join(', ')}`;
  }
  const parts = parseOptions(command, rule, args.slice(at + 1));
  if (typeof parts === 'string') return parts;
  let stdin = false;
  for (const part of parts) {
    if (part.kind !== 'option') continue;
    const option = rule.options.get(part.name) as OptionRule;
    const problem = checkValue(command, part, option, call);
    if (problem) return problem;
    if (option.stdin || (option.check === 'file-or-stdin' && part.value === '-')) stdin = true;
  }
  for (const part of parts) {
    if (part.kind !== 'word') continue;
    const outside = outsideFolder(part.text, call.cwd, call.root);
    if (outside) return refused(`argument ${part.text}`, `${outside}; git would read or write it here`);
  }
  const shaped = shapeWords(command, rule, parts, call);
  if (typeof shaped === 'string') return shaped;
  return { global, command, rest: shaped.flatMap(spell), stdin };
}

function spell(part: Part): string[] {
  if (part.kind === 'end') return ['--'];
  if (part.kind === 'word') return [part.text];
  if (part.value === undefined) return [part.name];
  return part.name.startsWith('--') ? [`${part.name}=${part.value}`] : [`${part.name}${part.value}`];
}

/** Splits the arguments into known options with their values, words and `--`; anything unknown is refused. */
function parseOptions(command: string, rule: SubcommandRule, args: readonly string[]): Part[] | string {
  const parts: Part[] = [];
  const unknown = (name: string) =>
    refused(
      `${command} ${name}`,
      `it is not among the options ccp runs on your machine for git ${command} (docs/cli.md lists them); run it on your machine`,
    );
  for (let at = 0; at < args.length; at++) {
    const arg = args[at] ?? '';
    if (parts.some((part) => part.kind === 'end')) {
      parts.push({ kind: 'word', text: arg });
    } else if (arg === '--') {
      parts.push({ kind: 'end' });
    } else if (arg.startsWith('--')) {
      const equals = arg.indexOf('=');
      const name = equals < 0 ? arg : arg.slice(0, equals);
      const option = rule.options.get(name);
      if (!option) return unknown(name);
      let value = equals < 0 ? undefined : arg.slice(equals + 1);
      if (option.value === 'none' && value !== undefined)
        return refused(`${command} ${arg}`, `${name} takes no value`);
      if (option.value === 'required' && value === undefined) {
        value = args[++at];
        if (value === undefined) return refused(`${command} ${name}`, 'it needs a value');
        if (value.startsWith('-') && value !== '-')
          return refused(
            `${command} ${name} ${value}`,
            `write a value that starts with - as ${name}=${value}`,
          );
      }
      parts.push({ kind: 'option', name, ...(value === undefined ? {} : { value }) });
    } else if (arg.startsWith('-') && arg.length > 1) {
      if (rule.numeric && /^-\d{1,9}$/.test(arg)) {
        parts.push({ kind: 'option', name: '-n', value: arg.slice(1) });
        continue;
      }
      for (let letter = 1; letter < arg.length; letter++) {
        const name = `-${arg[letter]}`;
        const option = rule.options.get(name);
        if (!option) return unknown(letter === 1 ? arg : `${name} (in ${arg})`);
        if (option.value === 'none') {
          parts.push({ kind: 'option', name });
          continue;
        }
        let value: string | undefined = arg.slice(letter + 1);
        if (value === '') value = undefined;
        if (option.value === 'required' && value === undefined) {
          value = args[++at];
          if (value === undefined) return refused(`${command} ${name}`, 'it needs a value');
          if (value.startsWith('-') && value !== '-')
            return refused(
              `${command} ${name} ${value}`,
              `write a value that starts with - as ${name}${value}`,
            );
        }
        parts.push({ kind: 'option', name, ...(value === undefined ? {} : { value }) });
        break;
      }
    } else {
      parts.push({ kind: 'word', text: arg });
    }
  }
  return parts;
}

function checkValue(
  command: string,
  part: Extract<Part, { kind: 'option' }>,
  option: OptionRule,
  call: GitCall,
): string | undefined {
  const value = part.value;
  const shown = value === undefined ? part.name : `${part.name} ${value}`;
  if (option.check === 'signing' && !call.signing && !part.name.startsWith('--no-')) {
    return refused(
      `${command} ${part.name}`,
      'signing with your key is off; set proxy_git_signing: true in ccp’s configuration to let the workspace sign',
    );
  }
  if (value === undefined) return undefined;
  if (value.includes('\0')) return refused(`${command} ${part.name}`, 'its value holds a NUL');
  if (option.check === 'strategy') {
    const problem = checkStrategy(value);
    if (problem) return refused(`${command} ${shown}`, problem);
  }
  if (option.check === 'strategy-option') {
    const problem = checkStrategyOption(value);
    if (problem) return refused(`${command} ${shown}`, problem);
  }
  if (option.check === 'file' || (option.check === 'file-or-stdin' && value !== '-')) {
    const copy = path.join(call.scratch, `file-${part.name.replace(/^-+/, '')}`);
    const problem = copyFromFolder(value, call.cwd, call.root, copy);
    if (problem) return refused(`${command} ${shown}`, problem);
    part.value = copy;
    return undefined;
  }
  const outside = outsideFolder(value, call.cwd, call.root);
  if (outside) return refused(`${command} ${shown}`, `${outside}; git would read or write it here`);
  return undefined;
}

const REF_NAME = /^(?!-)(?!.*\.\.)(?!.*@\{)(?!.*\/\/)[A-Za-z0-9._/*-]+(?<![./])$/;
const NAMES_HELP = 'name a remote this repository had when ccp started';

/** The words of each command as git gets them: remotes become their recorded URLs, refspecs are checked. */
function shapeWords(command: string, rule: SubcommandRule, parts: Part[], call: GitCall): Part[] | string {
  const words = parts.filter((part) => part.kind === 'word').map((part) => part.text);
  const options = parts.filter((part) => part.kind !== 'word');
  const end = parts.findIndex((part) => part.kind === 'end');
  const first = (end < 0 ? parts : parts.slice(0, end)).find((part) => part.kind === 'word');
  if (rule.noWords && words.length > 0) {
    return refused(`${command} ${words[0]}`, `git ${command} takes no file names here (use --stdin)`);
  }
  if (rule.actions && first?.kind === 'word' && command !== 'reflog' && !rule.actions.includes(first.text)) {
    return `git ${command} ${first.text} is not run on your machine; it runs: git ${command} ${rule.actions.join(', ')}`;
  }
  if (command === 'reflog' && first?.kind === 'word' && ['expire', 'delete'].includes(first.text)) {
    return `git reflog ${first.text} is not run on your machine; run it there`;
  }
  if (command === 'config') {
    const reads = ['--get', '--get-all', '--get-regexp', '-l', '--list'];
    if (!options.some((part) => part.kind === 'option' && reads.includes(part.name)))
      return 'git config runs on your machine only to read (--get, --get-all, --get-regexp, --list); set things on your machine';
    // The repository's own settings only: the global ones ccp hands git carry the user's credential helpers.
    return [{ kind: 'option', name: '--local' }, ...parts];
  }
  if (!['fetch', 'pull', 'push', 'ls-remote'].includes(command)) return parts;
  if (parts.some((part) => part.kind === 'end'))
    return refused(`${command} --`, 'name the remote and refs without it');
  const known = [...call.remotes.keys()];
  const name = words[0] ?? (command === 'fetch' || command === 'ls-remote' ? 'origin' : undefined);
  if (name === undefined)
    return `git ${command} needs the remote and the branch named (git ${command} origin main)`;
  const remote = call.remotes.get(name);
  if (!remote) {
    const had = known.length > 0 ? `it had: ${known.join(', ')}` : 'it had none (or ccp did not see it)';
    return refused(
      `${command} ${name}`,
      `${NAMES_HELP} (${had}); URLs, paths and remotes added since are not reached with your credentials`,
    );
  }
  const refspecs = words.slice(1);
  let shaped: string[] | string;
  if (command === 'fetch') shaped = fetchRefspecs(name, refspecs);
  else if (command === 'pull') shaped = pullRefspecs(refspecs);
  else if (command === 'push') shaped = pushRefspecs(refspecs);
  else shaped = refspecs;
  if (typeof shaped === 'string') return refused(`${command} ${words.join(' ')}`, shaped);
  const url = command === 'push' ? remote.pushUrl : remote.fetchUrl;
  return [...options, { kind: 'word', text: url }, ...shaped.map((text): Part => ({ kind: 'word', text }))];
}

/** Fetched refs land under refs/remotes/<name>/ only; a branch named alone lands on its remote-tracking ref. */
function fetchRefspecs(name: string, refspecs: string[]): string[] | string {
  if (refspecs.length === 0) return [`+refs/heads/*:refs/remotes/${name}/*`];
  const shaped: string[] = [];
  for (const refspec of refspecs) {
    const [, force = '', source = '', destination] = /^(\+?)([^:]*)(?::(.*))?$/.exec(refspec) ?? [];
    if (!REF_NAME.test(source)) return `${refspec} is not a branch or ref name`;
    const tracking = `refs/remotes/${name}/`;
    if (destination === undefined) {
      shaped.push(`${force}${source}:${tracking}${source.replace(/^refs\/heads\//, '')}`);
    } else if (destination.startsWith(tracking) && REF_NAME.test(destination)) {
      shaped.push(refspec);
    } else {
      return `fetched refs may only be written under ${tracking}`;
    }
  }
  return shaped;
}

function pullRefspecs(refspecs: string[]): string[] | string {
  if (refspecs.length === 0) return 'name the branch to pull (git pull origin main)';
  for (const refspec of refspecs) if (!REF_NAME.test(refspec)) return `${refspec} is not a branch name`;
  return refspecs;
}

/** Branches only, never forced, never deleted (`:ref`). */
function pushRefspecs(refspecs: string[]): string[] | string {
  if (refspecs.length === 0) return 'name the branch to push (git push origin my-branch)';
  const shaped: string[] = [];
  for (const refspec of refspecs) {
    if (refspec.startsWith('+'))
      return 'forced pushes are not run from the workspace; push from your machine';
    const [source = '', destination] = refspec.split(/:(.*)/s, 2);
    if (source === '')
      return 'deleting a remote branch is not run from the workspace; do it from your machine';
    const branch = (ref: string) => (ref.startsWith('refs/') ? ref : `refs/heads/${ref}`);
    if (destination === undefined) {
      if (source === 'HEAD') shaped.push('HEAD');
      else if (REF_NAME.test(source) && !source.includes('*') && branch(source).startsWith('refs/heads/'))
        shaped.push(`${branch(source)}:${branch(source)}`);
      else return `${refspec} is not a branch (push branches only: refs/heads/*)`;
      continue;
    }
    if (source.startsWith('-') || /[\0:*]/.test(source)) return `${source} is not a commit to push`;
    if (
      !REF_NAME.test(destination) ||
      destination.includes('*') ||
      !branch(destination).startsWith('refs/heads/')
    )
      return `${destination} is not a branch (push branches only: refs/heads/*)`;
    shaped.push(`${source}:${branch(destination)}`);
  }
  return shaped;
}
