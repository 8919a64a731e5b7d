import { ProgramSpec } from './program-spec';

/** jq reads the files after its filter. */
export const JQ: ProgramSpec = {
  names: ['jq'],
  reads: (call) => call.operands.slice(1).map((f) => call.read(f)),
};
