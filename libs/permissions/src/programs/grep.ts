import { ProgramSpec } from './program-spec';

/** grep and its kin read the files after the pattern. */
export const GREP: ProgramSpec = {
  names: ['grep', 'egrep', 'fgrep', 'rg'],
  reads: (call) => call.operands.slice(1).map((f) => call.read(f)),
};
