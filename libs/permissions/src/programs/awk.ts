import { check, ProgramCall, ProgramSpec } from './program-spec';

/** `system()`, `getline`, `print > file`, `print | "cmd"`: an awk program that runs commands or writes */
const SIDE_EFFECTS = /system\s*\(|getline|print[^;]*>|printf[^;]*>|\|\s*"|fflush/;
const hasSideEffects = ({ args }: ProgramCall) => args.some((a) => SIDE_EFFECTS.test(a.text));

/** awk reads the files after its program; a program with side effects asks. */
export const AWK: ProgramSpec = {
  names: ['awk', 'gawk', 'mawk', 'nawk'],
  effects: (call) =>
    hasSideEffects(call)
      ? [check('prompt', 'awk_side_effects', 'awk program runs commands or writes files')]
      : [],
  reads: (call) => (hasSideEffects(call) ? [] : call.operands.slice(1).map((f) => call.read(f))),
};
