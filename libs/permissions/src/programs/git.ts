import { PermissionCheck } from '@runledger/contracts';
import { ALLOW, check, ProgramSpec } from './program-spec';

const GIT_READ_ONLY = new Set([
  'status',
  'log',
  'diff',
  'show',
  'rev-parse',
  'ls-files',
  'blame',
  'describe',
  'shortlog',
  'grep',
  'cat-file',
  'ls-tree',
  'version',
  'help',
]);

/** Read-only subcommands run; anything that changes the repository or uses the network asks. */
export const GIT: ProgramSpec = {
  names: ['git'],
  effects: ({ args, words, operands, read }) => {
    // `-c core.pager=...`, `--exec-path`: a config on the command line runs programs; --output writes
    if (words.some((w) => /^(-c|--config-env|--exec-path|--output)(=|$)/.test(w) || /^-c./.test(w)))
      return [check('prompt', 'git_config', 'git with command-line configuration or output file')];
    const found: PermissionCheck[] = [];
    // `git -C dir status`: the folder is an option value, not the subcommand
    const cIdx = args.findIndex((a) => a.text === '-C');
    const sub =
      operands.find((o) => !o.text.startsWith('-') && (cIdx < 0 || o !== args[cIdx + 1]))?.text ?? '';
    if (cIdx >= 0 && args[cIdx + 1]) found.push(read(args[cIdx + 1]));
    found.push(
      GIT_READ_ONLY.has(sub)
        ? ALLOW
        : check('prompt', 'git_write', `git ${sub} changes the repository or uses the network`),
    );
    return found;
  },
};
