import { optionReads, ProgramCall, ProgramSpec } from './program-spec';

/** `-e PATTERN`, `-f FILE` (also inside a cluster: `-ie x`), `--regexp=`, `--file=`: no pattern operand then */
const patternByOption = ({ words }: ProgramCall) =>
  words.some((w) => /^-[a-zA-Z]*[ef]/.test(w) || /^--(regexp|file)(=|$)/.test(w));

/**
 * grep and its kin read the files after the pattern, or every operand when the pattern comes from
 * `-e`/`-f`; the pattern and exclude files named by options are reads too.
 */
export const GREP: ProgramSpec = {
  names: ['grep', 'egrep', 'fgrep', 'rg'],
  reads: (call) => [
    ...optionReads(call, ['-f', '--file', '--exclude-from', '--ignore-file']),
    ...call.operands.slice(patternByOption(call) ? 0 : 1).map((f) => call.read(f)),
  ],
};
