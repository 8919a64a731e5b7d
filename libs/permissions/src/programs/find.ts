import path from 'node:path';
import { PermissionCheck } from '@runledger/contracts';
import { ShellWord } from '../shell/shell-parse';
import { check, ProgramSpec } from './program-spec';

/** Programs `find -exec` may run that destroy what find found. */
const DESTRUCTIVE_EXEC = /^(rm|shred|mv|chmod|chown|unlink|dd|truncate)$/;

/**
 * find reads its start folders; `-delete` (or `-exec rm`) from a system folder is a hard stop,
 * `-delete` elsewhere asks, `-fprint`/`-fls` write a file. The `-exec` command is unfolded by the
 * parser and judged on its own.
 */
export const FIND: ProgramSpec = {
  names: ['find'],
  decide: (call) => {
    const { args } = call;
    const destructive =
      call.has('-delete') ||
      args.some(
        (a, i) =>
          ['-exec', '-execdir', '-ok', '-okdir'].includes(a.text) &&
          DESTRUCTIVE_EXEC.test(path.basename(args[i + 1]?.text ?? '')),
      );
    return destructive && startsOf(call.args).some((s) => call.catastrophic(s))
      ? check('hard_stop', 'find_delete_root', 'deletes from a system folder with find')
      : null;
  },
  effects: (call) => {
    const found: PermissionCheck[] = startsOf(call.args).map((s) => call.read(s));
    // `-files0-from FILE`: the start folders are listed in a file
    for (const [i, a] of call.args.entries())
      if (a.text === '-files0-from' && call.args[i + 1]) found.push(call.read(call.args[i + 1]));
    if (call.has('-delete')) found.push(check('prompt', 'delete_program', 'find -delete removes files'));
    for (const [i, a] of call.args.entries())
      if (/^-fprint|^-fls$/.test(a.text) && call.args[i + 1]) found.push(call.write(call.args[i + 1]));
    return found;
  },
};

/** The folders find starts from: the arguments before the first option or expression. */
function startsOf(args: readonly ShellWord[]): ShellWord[] {
  return args
    .slice(
      0,
      Math.max(
        0,
        args.findIndex((a) => a.text.startsWith('-') || a.text === '(' || a.text === '!'),
      ),
    )
    .concat(args.every((a) => !a.text.startsWith('-')) ? args : []);
}
