import { optionReads, ProgramSpec, unknownProgram } from './program-spec';

/**
 * xargs runs another command (unfolded by the parser and judged on its own) with arguments read
 * from stdin or from the file `-a FILE` names: that file is xargs's own read.
 */
export const XARGS: ProgramSpec = {
  names: ['xargs'],
  effects: ({ name }) => [unknownProgram(name)],
  reads: (call) => optionReads(call, ['-a', '--arg-file']),
};
