import { optionValues, ProgramCall, ProgramSpec } from './program-spec';

const readsOperands = (call: ProgramCall) => call.operands.map((f) => call.read(f));

/** Read-only programs: allowed when the files they read are inside the allowed root. */
export const READERS: ProgramSpec = {
  names: [
    'ls',
    'cat',
    'head',
    'tail',
    'wc',
    'cut',
    'tr',
    'diff',
    'cmp',
    'file',
    'stat',
    'du',
    'df',
    'less',
    'more',
    'nl',
    'od',
    'hexdump',
    'sha256sum',
    'sha1sum',
    'sha512sum',
    'md5sum',
    'cksum',
    'base64',
    'base32',
    'column',
    'fold',
    'expand',
    'unexpand',
    'paste',
    'comm',
    'tac',
    'rev',
    'strings',
    'realpath',
    'readlink',
    'basename',
    'dirname',
    'zcat',
    'bat',
    'look',
    'join',
    'fmt',
    'pr',
    'tsort',
  ],
  reads: readsOperands,
};

/** Readers that write the file named by an output option (`sort -o out`). */
export const OUTPUT_OPTION_READERS: ProgramSpec[] = [
  { names: ['sort', 'iconv'], options: ['-o', '--output'] },
  { names: ['tree'], options: ['-o'] },
].map(({ names, options }) => ({
  names,
  effects: (call: ProgramCall) => optionValues(call.args, options).map((w) => call.write(w)),
  reads: readsOperands,
}));

/** Readers whose second operand is the output file (`uniq in out`, `xxd in out`). */
export const SECOND_OPERAND_WRITERS: ProgramSpec = {
  names: ['uniq', 'xxd'],
  effects: (call) => (call.operands[1] ? [call.write(call.operands[1])] : []),
  reads: readsOperands,
};

export const READER_SPECS = [READERS, ...OUTPUT_OPTION_READERS, SECOND_OPERAND_WRITERS];
