import { check, ProgramCall, ProgramSpec } from './program-spec';
import { fileWrites } from './file-writers';

const inPlace = ({ has, words }: ProgramCall) =>
  has('-i', '--in-place') || words.some((w) => /^-[a-zA-Z]*i/.test(w) || w.startsWith('--in-place'));
/** `w file`, `s/a/b/w file`, `e cmd`: a sed script that writes files or runs commands */
const SCRIPT_SIDE_EFFECTS = /(^|[;}\n])\s*[0-9,$/!]*\s*[wWe]\b|\/[gpIiMm0-9]*[we]/;
const scriptHasSideEffects = ({ args }: ProgramCall) => args.some((a) => SCRIPT_SIDE_EFFECTS.test(a.text));

/** sed reads the files after its script; `-i` rewrites them; a script with `w` or `e` asks. */
export const SED: ProgramSpec = {
  names: ['sed'],
  effects: (call) => {
    if (inPlace(call)) return fileWrites(call, call.operands.slice(1));
    if (scriptHasSideEffects(call))
      return [check('prompt', 'write_program', 'sed script writes files or runs commands')];
    return [];
  },
  reads: (call) =>
    inPlace(call) || scriptHasSideEffects(call) ? [] : call.operands.slice(1).map((f) => call.read(f)),
};
