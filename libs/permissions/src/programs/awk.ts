import { check, optionReads, ProgramCall, ProgramSpec } from './program-spec';

/** `system()`, `getline`, `print > file`, `print | "cmd"`: an awk program that runs commands or writes */
const SIDE_EFFECTS = /system\s*\(|getline|print[^;]*>|printf[^;]*>|\|\s*"|fflush/;
const hasSideEffects = ({ args }: ProgramCall) => args.some((a) => SIDE_EFFECTS.test(a.text));

/** `-f FILE`, gawk's `-e TEXT`/`--source`: the program is not an operand then */
const programByOption = ({ words }: ProgramCall) =>
  words.some((w) => /^-[a-zA-Z]*[ef]/.test(w) || /^--(file|source)(=|$)/.test(w));
/** program files and gawk's include/exec files */
const PROGRAM_FILE_OPTIONS = ['-f', '--file', '-i', '--include', '-E', '--exec'];

/** awk reads the files after its program, and its program files; a program with side effects asks. */
export const AWK: ProgramSpec = {
  names: ['awk', 'gawk', 'mawk', 'nawk'],
  effects: (call) =>
    hasSideEffects(call)
      ? [check('prompt', 'awk_side_effects', 'awk program runs commands or writes files')]
      : [],
  reads: (call) => [
    ...optionReads(call, PROGRAM_FILE_OPTIONS),
    ...(hasSideEffects(call)
      ? []
      : call.operands.slice(programByOption(call) ? 0 : 1).map((f) => call.read(f))),
  ],
};
