/*
 * The git commands the workspace may run on this machine, each with the options it may take and checks on
 * their values. The workspace is hostile: anything not listed here is refused, so a git option we have never
 * heard of (a new one, an abbreviation git would accept) does not run. Each entry says why it is safe.
 */

/** How an option takes a value: none, one it needs (`--x=v`, `--x v`, `-xv`, `-x v`), or one only attached. */
export type ValueKind = 'none' | 'required' | 'optional';

/** What the value is checked as, beyond "does not name a file outside the folder" (every value is). */
export type ValueCheck =
  /** A merge strategy: built in only (a name with a slash is a program in the work tree). */
  | 'strategy'
  | 'strategy-option'
  /** A file git reads: ccp reads it (inside the folder, as the kernel resolves it) and hands git a copy. */
  | 'file'
  /** As 'file', or `-` for stdin. */
  | 'file-or-stdin'
  /** Signs with the user's key: only with proxy_git_signing. */
  | 'signing';

export interface OptionRule {
  value: ValueKind;
  check?: ValueCheck;
  /** The option makes git read the workspace's stdin (which is otherwise not passed on). */
  stdin?: boolean;
  /** Why the workspace may use it on this machine. */
  reason: string;
}

export interface SubcommandRule {
  /** Keyed by the exact spelling (`--message`, `-m`); git's abbreviations are not accepted. */
  options: Map<string, OptionRule>;
  /** `-<number>` (log -5, grep -3) is taken as a count. */
  numeric?: boolean;
  /** The first word selects an action (stash push, remote get-url): the allowed ones. */
  actions?: readonly string[];
  /** Takes no paths or revisions (hash-object: git would open the files named). */
  noWords?: boolean;
  /** Why the command itself is safe here. */
  reason: string;
}

/** Built-in merge strategies: git runs its own code or its own git-merge-<name> from its exec path. */
export const BUILT_IN_STRATEGIES = ['ort', 'recursive', 'resolve', 'octopus', 'ours', 'subtree'];

/** Strategy options of ort and recursive that only change how the merge is computed. */
const STRATEGY_OPTIONS =
  /^(ours|theirs|patience|histogram|minimal|diff-algorithm=(patience|minimal|histogram|myers)|ignore-space-change|ignore-all-space|ignore-space-at-eol|ignore-cr-at-eol|renormalize|no-renormalize|no-renames|find-renames(=\d{1,3}%?)?|rename-threshold=\d{1,3}%?|subtree(=[^\0]{0,4096})?)$/;

export function checkStrategy(value: string): string | undefined {
  return BUILT_IN_STRATEGIES.includes(value)
    ? undefined
    : `only built-in strategies run (${BUILT_IN_STRATEGIES.join(', ')}): any other is a program`;
}

export function checkStrategyOption(value: string): string | undefined {
  return STRATEGY_OPTIONS.test(value)
    ? undefined
    : 'only the built-in strategies’ options (ours, theirs, patience, ignore-space-change, …) are taken';
}

/**
 * Options in a compact spelling: `--name` a flag, `--name=` needs a value, `--name=?` takes one only attached;
 * `-x`, `-x=`, `-x=?` the same for letters; a trailing `!` marks an option that makes git read stdin.
 */
function group(reason: string, spelled: string, check?: ValueCheck): [string, OptionRule][] {
  return spelled
    .split(/\s+/)
    .filter(Boolean)
    .map((token) => {
      const stdin = token.endsWith('!');
      let name = stdin ? token.slice(0, -1) : token;
      let value: ValueKind = 'none';
      if (name.endsWith('=?')) [name, value] = [name.slice(0, -2), 'optional'];
      else if (name.endsWith('=')) [name, value] = [name.slice(0, -1), 'required'];
      return [name, { value, reason, ...(check ? { check } : {}), ...(stdin ? { stdin } : {}) }];
    });
}

const OUTPUT = 'it changes only what is printed';
const SELECT = 'it selects what to show among the repository’s own commits and files';
const WORKTREE = 'it changes files and refs inside the mounted folder only';

/** The revision walk and diff output options of log, show, diff, shortlog. */
const REVISION_OUTPUT = [
  ...group(
    OUTPUT,
    `-p -u --patch -s --no-patch --raw --patch-with-raw --patch-with-stat --stat=? --numstat --shortstat
     --dirstat=? --summary --name-only --name-status --oneline --abbrev-commit --no-abbrev-commit --abbrev=?
     --full-index --binary --graph --decorate=? --no-decorate --source --parents --children --left-right
     --relative-date --date= --pretty=? --format= --color=? --no-color --color-moved=? --no-color-moved
     --word-diff=? --word-diff-regex= --color-words=? -z --full-diff --cc -c -m --first-parent
     --diff-merges= --no-diff-merges --remerge-diff --notes=? --no-notes --show-signature --use-mailmap
     --mailmap --no-mailmap -q --quiet --no-prefix --src-prefix= --dst-prefix= --line-prefix= --stat-width=
     --stat-name-width= --stat-count= --compact-summary --log-size --show-linear-break=? --encoding=
     --expand-tabs=? --no-expand-tabs --indent-heuristic --no-indent-heuristic --minimal --patience
     --histogram --diff-algorithm= --anchored= -U= --unified= --inter-hunk-context= -W --function-context
     --exit-code --check --ws-error-highlight= -w --ignore-all-space -b --ignore-space-change
     --ignore-space-at-eol --ignore-cr-at-eol --ignore-blank-lines -I= --ignore-matching-lines= -R -B=? -M=?
     -C=? --break-rewrites=? --find-renames=? --find-copies=? --find-copies-harder --no-renames
     --rename-empty --no-rename-empty -l= --irreversible-delete -D --text -a --no-textconv
     --no-ext-diff --relative=? --no-relative --clear-decorations --decorate-refs= --decorate-refs-exclude=`,
  ),
  ...group(
    SELECT,
    `-n= --max-count= --skip= --since= --after= --until= --before= --author= --committer= --grep=
     --all-match --invert-grep -i --regexp-ignore-case --basic-regexp -E --extended-regexp -F
     --fixed-strings -P --perl-regexp --merges --no-merges --min-parents= --max-parents= --no-min-parents
     --no-max-parents --all --branches=? --tags=? --remotes=? --glob= --exclude= --reflog --not
     --ancestry-path=? --simplify-by-decoration --full-history --dense --sparse --simplify-merges
     --reverse --walk-reflogs -g --topo-order --date-order --author-date-order --no-walk=? --do-walk
     --boundary --cherry-pick --cherry-mark --cherry --left-only --right-only --follow -S= -G=
     --pickaxe-all --pickaxe-regex --find-object= --diff-filter= --single-worktree --ignore-missing
     --cached --staged --merge-base`,
  ),
];

/** Options of commands that make a commit or change the index and work tree, shared by several. */
const SIGNING = group(
  'it signs with your key: only when you set proxy_git_signing: true',
  '-S=? --gpg-sign=? --no-gpg-sign',
  'signing',
);
const STRATEGY_REASON =
  'only a built-in strategy is taken (a name with a slash is a program in the work tree)';
/** cherry-pick and revert spell it only long: their -s is --signoff. */
const STRATEGY = [
  ...group(STRATEGY_REASON, '--strategy=', 'strategy'),
  ...group(
    'only the built-in strategies’ own options are taken',
    '-X= --strategy-option=',
    'strategy-option',
  ),
];
const SHORT_STRATEGY = group(STRATEGY_REASON, '-s=', 'strategy');
const SEQUENCE_END = group(
  'it ends the sequence without reading its saved options (which the workspace can rewrite)',
  '--abort --quit',
);
const QUIET = group(OUTPUT, '-q --quiet -v --verbose --progress --no-progress');

function command(reason: string, options: [string, OptionRule][], extra?: Partial<SubcommandRule>) {
  return { reason, options: new Map(options), ...extra } satisfies SubcommandRule;
}

const SUBCOMMANDS: Record<string, SubcommandRule> = {
  status: command('it reads the repository and the work tree', [
    ...QUIET,
    ...group(
      OUTPUT,
      `-s --short -b --branch --show-stash --ahead-behind --no-ahead-behind --porcelain=? --long -z --null
       -u=? --untracked-files=? --ignored=? --column=? --no-column --renames --no-renames -M=? --find-renames=?`,
    ),
  ]),
  log: command('it reads the repository', REVISION_OUTPUT, { numeric: true }),
  show: command('it reads the repository', REVISION_OUTPUT, { numeric: true }),
  diff: command(
    'it compares the repository’s commits, index and work tree (never files outside it)',
    REVISION_OUTPUT,
  ),
  shortlog: command('it reads the repository', [
    ...REVISION_OUTPUT,
    ...group(OUTPUT, '-n --numbered -s --summary -e --email -c --committer --group= -w=?'),
  ]),
  blame: command('it reads the repository', [
    ...group(
      OUTPUT,
      `--incremental -b --root --show-stats --progress --no-progress -f --show-name -n --show-number -p
       --porcelain --line-porcelain -c -t -l -s -e --show-email -w --color-lines --color-by-age --minimal
       -C=? -M=? -L= --abbrev=? --date= --reverse --first-parent --ignore-rev= --encoding=`,
    ),
    ...group(
      'ccp hands git a copy of the file, read inside the mounted folder',
      '--contents= --ignore-revs-file=',
      'file',
    ),
  ]),
  grep: command(
    'it searches the repository’s files',
    [
      ...group(
        OUTPUT,
        `--cached --untracked --exclude-standard --no-exclude-standard -v --invert-match -i --ignore-case -w
         --word-regexp -a --text -I -r --recursive --no-recursive --max-depth= -E --extended-regexp -G
         --basic-regexp -F --fixed-strings -P --perl-regexp -n --line-number --column -h -H --full-name -l
         --files-with-matches --name-only -L --files-without-match -z --null -o --only-matching -c --count
         --color=? --no-color --break --heading -C= --context= -B= --before-context= -A= --after-context=
         -p --show-function -W --function-context -e= --and --or --not -q --quiet --all-match -m= --max-count=
         --threads=`,
      ),
      ...group('ccp hands git a copy of the file, read inside the mounted folder', '-f=', 'file'),
    ],
    { numeric: true },
  ),
  'ls-files': command('it lists the repository’s files', [
    ...group(
      OUTPUT,
      `-z -t -v -f -c --cached -d --deleted -m --modified -o --others -i --ignored -s --stage -k --killed
       --directory --no-empty-directory --eol --empty-directory -u --unmerged --resolve-undo -x= --exclude=
       --exclude-standard --full-name --error-unmatch --with-tree= --abbrev=? --debug --deduplicate --format=`,
    ),
  ]),
  'ls-tree': command('it lists a tree of the repository', [
    ...group(
      OUTPUT,
      '-d -r -t -l --long -z --name-only --name-status --object-only --full-name --full-tree --abbrev=? --format=',
    ),
  ]),
  'rev-parse': command('it names revisions and the repository’s paths', [
    ...group(
      OUTPUT,
      `--verify -q --quiet --short=? --abbrev-ref=? --symbolic --symbolic-full-name --show-toplevel --show-cdup
       --show-prefix --git-dir --git-common-dir --absolute-git-dir --is-inside-work-tree --is-inside-git-dir
       --is-bare-repository --is-shallow-repository --show-object-format=? --show-superproject-working-tree
       --all --branches=? --tags=? --remotes=? --default= --revs-only --no-revs --flags --no-flags --not
       --path-format= --sq --local-env-vars --since= --until= --after= --before=`,
    ),
  ]),
  'rev-list': command(
    'it lists the repository’s commits',
    [...REVISION_OUTPUT, ...group(OUTPUT, '--count --objects --no-object-names')],
    {
      numeric: true,
    },
  ),
  'merge-base': command('it reads the repository', [
    ...group(OUTPUT, '-a --all --octopus --independent --is-ancestor --fork-point'),
  ]),
  'cat-file': command('it prints objects of the repository (alternates are refused)', [
    ...group(
      OUTPUT,
      '-e -p -t -s --allow-unknown-type --use-mailmap --mailmap --no-mailmap -z --buffer --unordered',
    ),
    ...group('it reads object names from stdin and prints them', '--batch=?! --batch-check=?!'),
  ]),
  'show-ref': command('it lists refs', [
    ...group(
      OUTPUT,
      '--head --heads --tags -d --dereference -s --hash=? --abbrev=? --verify -q --quiet --exists',
    ),
  ]),
  'for-each-ref': command('it lists refs', [
    ...group(
      OUTPUT,
      '--count= --shell --perl --python --tcl --format= --color=? --sort= --points-at= --merged= --no-merged= --contains= --no-contains= --ignore-case',
    ),
  ]),
  describe: command('it names a commit', [
    ...group(
      OUTPUT,
      '--contains --debug --all --tags --long --first-parent --abbrev=? --exact-match --candidates= --match= --exclude= --always --dirty=? --broken=?',
    ),
  ]),
  'name-rev': command('it names a commit', [
    ...group(OUTPUT, '--name-only --tags --refs= --exclude= --all --always --undefined --no-undefined'),
  ]),
  reflog: command('it lists the reflog', [...REVISION_OUTPUT], {
    actions: ['show', 'exists'],
    numeric: true,
  }),
  'check-ignore': command('it matches paths against the ignore rules', [
    ...group(OUTPUT, '-q --quiet -v --verbose -n --non-matching --no-index -z'),
    ...group('it reads paths from stdin to match them, and opens none', '--stdin!'),
  ]),
  'hash-object': command(
    'it hashes what stdin carries (file paths are not taken: git would open them)',
    [...group(WORKTREE, '-w -t= --literally'), ...group('it hashes stdin itself', '--stdin!')],
    { noWords: true },
  ),
  add: command('it stages files of the folder', [
    ...group(
      WORKTREE,
      `-n --dry-run -v --verbose -f --force -u --update --renormalize -N --intent-to-add -A --all
       --no-all --ignore-removal --no-ignore-removal --refresh --ignore-errors --ignore-missing --sparse --chmod=`,
    ),
    ...group('it asks on stdin which changes to stage', '-p! --patch! -i! --interactive!'),
  ]),
  rm: command('it removes files of the folder', [
    ...group(WORKTREE, '-n --dry-run -q --quiet --cached -f --force -r --ignore-unmatch --sparse'),
  ]),
  mv: command('it moves files within the folder', [
    ...group(WORKTREE, '-v --verbose -n --dry-run -f --force -k --sparse'),
  ]),
  restore: command('it restores files of the folder', [
    ...group(
      WORKTREE,
      `-s= --source= -S --staged -W --worktree --ignore-unmerged --overlay --no-overlay -q --quiet --progress
       --no-progress -m --merge --conflict= -2 --ours -3 --theirs --ignore-skip-worktree-bits`,
    ),
    ...group('it asks on stdin which changes to restore', '-p! --patch!'),
  ]),
  checkout: command('it switches branches or restores files of the folder', [
    ...group(
      WORKTREE,
      `-b= -B= -l --guess --no-guess --overlay --no-overlay -q --quiet --progress --no-progress -m --merge
       --conflict= -d --detach -t=? --track=? --no-track -f --force --orphan= --overwrite-ignore
       --no-overwrite-ignore --ignore-other-worktrees -2 --ours -3 --theirs --ignore-skip-worktree-bits`,
    ),
    ...group('it asks on stdin which changes to restore', '-p! --patch!'),
  ]),
  switch: command('it switches branches', [
    ...group(
      WORKTREE,
      `-c= --create= -C= --force-create= --guess --no-guess --discard-changes -q --quiet --progress
       --no-progress -m --merge --conflict= -d --detach -t=? --track=? --no-track -f --force --orphan=
       --overwrite-ignore --no-overwrite-ignore --ignore-other-worktrees`,
    ),
  ]),
  reset: command('it moves the branch and resets the index and work tree', [
    ...group(
      WORKTREE,
      '-q --quiet --no-refresh --refresh --mixed --soft --hard --merge --keep -N --intent-to-add',
    ),
    ...group('it asks on stdin which changes to reset', '-p! --patch!'),
  ]),
  clean: command('it deletes untracked files inside the folder', [
    ...group(WORKTREE, '-d -f --force -i -n --dry-run -q --quiet -e= --exclude= -x -X'),
  ]),
  commit: command('it commits with your identity', [
    ...group(
      WORKTREE,
      `-q --quiet -v --verbose --author= --date= -m= --message= -c= --reedit-message= -C= --reuse-message=
       --fixup= --squash= --reset-author -s --signoff --no-signoff -e --edit --no-edit --cleanup=
       --status --no-status -a --all -i --include -o --only -n --no-verify --verify --dry-run --short
       --branch --porcelain --long -z --null --amend --no-post-rewrite -u=? --untracked-files=?
       --allow-empty --allow-empty-message`,
    ),
    ...group(
      'ccp hands git a copy of the file, read inside the mounted folder (or stdin)',
      '-F= --file=',
      'file-or-stdin',
    ),
    ...group('ccp hands git a copy of the file, read inside the mounted folder', '-t= --template=', 'file'),
    ...SIGNING,
  ]),
  branch: command('it lists and changes the repository’s branches', [
    ...group(
      WORKTREE,
      `-v --verbose -q --quiet -t=? --track=? --no-track -u= --set-upstream-to= --unset-upstream
       --color=? --no-color -r --remotes --contains= --no-contains= --abbrev=? --no-abbrev -a --all -d
       --delete -D -m --move -M -c --copy -C -l --list --show-current --create-reflog -f --force --merged=
       --no-merged= --column=? --no-column --sort= --points-at= -i --ignore-case --format=`,
    ),
  ]),
  tag: command('it lists and makes tags', [
    ...group(
      WORKTREE,
      `-l --list -n=? -d --delete -v --verify -a --annotate -m= --message= -e --edit --no-edit --cleanup= -f
       --force --create-reflog --column=? --no-column --contains= --no-contains= --merged= --no-merged=
       --sort= --points-at= --format= --color=? -i --ignore-case`,
    ),
    ...group(
      'ccp hands git a copy of the file, read inside the mounted folder (or stdin)',
      '-F= --file=',
      'file-or-stdin',
    ),
    ...group(
      'it signs with your key: only when you set proxy_git_signing: true',
      '-s --sign -u= --local-user=',
      'signing',
    ),
    ...group(OUTPUT, '--no-sign'),
  ]),
  stash: command(
    'it saves and restores work in the folder',
    [
      ...REVISION_OUTPUT,
      ...group(
        WORKTREE,
        `-q --quiet -k --keep-index --no-keep-index -u --include-untracked --no-include-untracked -a --all
         -m= --message= --staged -S --index`,
      ),
      ...group('it asks on stdin which changes to stash', '-p! --patch!'),
    ],
    { actions: ['list', 'show', 'push', 'save', 'pop', 'apply', 'drop', 'branch', 'clear', 'create'] },
  ),
  merge: command('it merges commits of the repository', [
    ...group(
      WORKTREE,
      `-n --stat --no-stat --summary --no-summary --log=? --no-log --squash --no-squash --commit --no-commit
       -e --edit --no-edit --cleanup= --ff --no-ff --ff-only --rerere-autoupdate --no-rerere-autoupdate
       --verify-signatures --no-verify-signatures -m= --message= --into-name= -v --verbose -q --quiet
       --continue --allow-unrelated-histories --progress --no-progress --autostash --no-autostash
       --overwrite-ignore --no-overwrite-ignore --signoff --no-signoff --no-verify --verify`,
    ),
    ...group(
      'ccp hands git a copy of the file, read inside the mounted folder (or stdin)',
      '-F= --file=',
      'file-or-stdin',
    ),
    ...SEQUENCE_END,
    ...STRATEGY,
    ...SHORT_STRATEGY,
    ...SIGNING,
  ]),
  'cherry-pick': command('it applies commits of the repository', [
    ...group(
      WORKTREE,
      `--cleanup= -n --no-commit -e --edit --no-edit -s --signoff -m= --mainline= --rerere-autoupdate
       --no-rerere-autoupdate -x --ff --allow-empty --allow-empty-message --keep-redundant-commits`,
    ),
    ...SEQUENCE_END,
    ...STRATEGY,
    ...SIGNING,
  ]),
  revert: command('it reverts commits of the repository', [
    ...group(
      WORKTREE,
      `--cleanup= -n --no-commit -e --edit --no-edit -s --signoff -m= --mainline= --rerere-autoupdate
       --no-rerere-autoupdate --reference`,
    ),
    ...SEQUENCE_END,
    ...STRATEGY,
    ...SIGNING,
  ]),
  rebase: command('it replays commits of the repository; never interactively, never with exec lines', [
    ...group(
      WORKTREE,
      `--onto= --keep-base --no-keep-base --no-verify --verify -q --quiet -v --verbose -n --no-stat --stat
       --signoff --committer-date-is-author-date --reset-author-date --ignore-whitespace -f --force-rebase
       --no-ff --show-current-patch -m --merge --rerere-autoupdate --no-rerere-autoupdate --empty=
       --update-refs --no-update-refs --autostash --no-autostash --fork-point --no-fork-point --root
       --reapply-cherry-picks --no-reapply-cherry-picks`,
    ),
    ...SEQUENCE_END,
    ...STRATEGY,
    ...SHORT_STRATEGY,
    ...SIGNING,
  ]),
  fetch: command('it fetches from a remote recorded when ccp started, into refs/remotes/<name>/', [
    ...group(
      WORKTREE,
      `-v --verbose -q --quiet -t --tags -n --no-tags -p --prune --no-prune --dry-run --progress --no-progress
       --depth= --shallow-since= --shallow-exclude= --deepen= --unshallow --show-forced-updates
       --no-show-forced-updates -4 --ipv4 -6 --ipv6 --atomic --no-write-fetch-head --write-fetch-head
       -f --force -k --keep`,
    ),
  ]),
  pull: command('it pulls a branch from a remote recorded when ccp started', [
    ...group(
      WORKTREE,
      `-v --verbose -q --quiet --progress --no-progress -r=? --rebase=? --no-rebase -n --stat --no-stat
       --log=? --no-log --signoff --no-signoff --squash --no-squash --commit --no-commit --edit --no-edit
       --cleanup= --ff --no-ff --ff-only --verify --no-verify --autostash --no-autostash
       --allow-unrelated-histories -t --tags --no-tags -p --prune --depth= --unshallow -4 --ipv4 -6 --ipv6`,
    ),
    ...STRATEGY,
    ...SHORT_STRATEGY,
    ...SIGNING,
  ]),
  push: command('it pushes branches to a remote recorded when ccp started; never deletes or forces', [
    ...group(
      WORKTREE,
      `-v --verbose -q --quiet -n --dry-run --porcelain --progress --no-progress --atomic --no-atomic
       --no-verify --verify -4 --ipv4 -6 --ipv6 --thin --no-thin`,
    ),
    ...group(
      'it signs the push with your key: only when you set proxy_git_signing: true',
      '--signed=? --no-signed',
      'signing',
    ),
  ]),
  'ls-remote': command('it lists the refs of a remote recorded when ccp started', [
    ...group(OUTPUT, '-q --quiet -t --tags -h --heads --refs --sort= --exit-code --symref'),
  ]),
  remote: command('it lists the remotes', [...group(OUTPUT, '-v --verbose')], { actions: ['get-url'] }),
  config: command('it reads the repository’s own settings (never writes one, never reads yours)', [
    ...group(
      OUTPUT,
      `--get --get-all --get-regexp -l --list --local -z --null --name-only --show-origin --show-scope --type=
       --bool --int --bool-or-int --path --default= --includes --no-includes`,
    ),
  ]),
};

/** The command's rule, if the command is allowed. */
export function gitSubcommand(name: string): SubcommandRule | undefined {
  return Object.hasOwn(SUBCOMMANDS, name) ? SUBCOMMANDS[name] : undefined;
}

export const GIT_SUBCOMMANDS = Object.keys(SUBCOMMANDS);
