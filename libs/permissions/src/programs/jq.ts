import { optionReads, ProgramCall, ProgramSpec } from './program-spec';

/** `-f FILE`/`--from-file`: the filter comes from a file, and every operand is an input file */
const filterFromFile = ({ words }: ProgramCall) =>
  words.some((w) => /^-[a-zA-Z]*f/.test(w) || /^--from-file(=|$)/.test(w));

/** jq reads the files after its filter, the filter file, and its module folder (`-L`). */
export const JQ: ProgramSpec = {
  names: ['jq'],
  reads: (call) => [
    ...optionReads(call, ['-f', '--from-file', '-L']),
    ...call.operands.slice(filterFromFile(call) ? 0 : 1).map((f) => call.read(f)),
  ],
};
