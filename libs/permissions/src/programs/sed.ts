import { check, optionReads, ProgramCall, ProgramSpec } from './program-spec';
import { fileWrites } from './file-writers';

const inPlace = ({ has, words }: ProgramCall) =>
  has('-i', '--in-place') || words.some((w) => /^-[a-zA-Z]*i/.test(w) || w.startsWith('--in-place'));
/** `w file`, `s/a/b/w file`, `e cmd`: a sed script that writes files or runs commands */
const SCRIPT_SIDE_EFFECTS = /(^|[;}\n])\s*[0-9,$/!]*\s*[wWe]\b|\/[gpIiMm0-9]*[we]/;
/** `-e SCRIPT`, `-f FILE`, `--expression=`, `--file=`: the first operand is a file then, not the script */
const scriptByOption = ({ words }: ProgramCall) =>
  words.some((w) => /^-[a-zA-Z]*[ef]/.test(w) || /^--(expression|file)(=|$)/.test(w));
const files = (call: ProgramCall) => call.operands.slice(scriptByOption(call) ? 0 : 1);
const scriptHasSideEffects = ({ args }: ProgramCall) => args.some((a) => SCRIPT_SIDE_EFFECTS.test(a.text));

/** sed reads the files after its script (and a script file); `-i` rewrites them; a script with `w` or `e` asks. */
export const SED: ProgramSpec = {
  names: ['sed'],
  effects: (call) => {
    if (inPlace(call)) return fileWrites(call, files(call));
    if (scriptHasSideEffects(call))
      return [check('prompt', 'sed_side_effects', 'sed script writes files or runs commands')];
    return [];
  },
  reads: (call) => [
    ...optionReads(call, ['-f', '--file']),
    ...(inPlace(call) || scriptHasSideEffects(call) ? [] : files(call).map((f) => call.read(f))),
  ],
};
