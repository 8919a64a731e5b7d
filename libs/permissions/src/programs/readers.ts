import { PermissionCheck } from '@runledger/contracts';
import { optionReads, optionValues, ProgramCall, ProgramSpec } from './program-spec';

const readsOperands = (call: ProgramCall) => call.operands.map((f) => call.read(f));
/** A reader whose options may name more files to read (`diff --from-file=F`, `wc --files0-from=F`). */
const readsOperandsAnd =
  (fileOptions: readonly string[]) =>
  (call: ProgramCall): PermissionCheck[] => [...optionReads(call, fileOptions), ...readsOperands(call)];

/** Read-only programs: allowed when the files they read are inside the allowed root. */
export const READERS: ProgramSpec = {
  names: [
    'ls',
    'cat',
    'head',
    'tail',
    'cut',
    'tr',
    'cmp',
    'stat',
    'df',
    'less',
    'more',
    'nl',
    'od',
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

/** Readers with options that name more files to read. */
export const FILE_OPTION_READERS: ProgramSpec[] = [
  { names: ['diff'], fileOptions: ['--from-file', '--to-file', '-X', '--exclude-from'] },
  { names: ['wc'], fileOptions: ['--files0-from'] },
  { names: ['du'], fileOptions: ['--files0-from', '-X', '--exclude-from'] },
  { names: ['file'], fileOptions: ['-f', '--files-from', '-m', '--magic-file'] },
  { names: ['hexdump'], fileOptions: ['-f', '--format-file'] },
].map(({ names, fileOptions }) => ({ names, reads: readsOperandsAnd(fileOptions) }));

/** `strings @FILE` reads more options from FILE (binutils), and shows what it cannot parse. */
export const STRINGS: ProgramSpec = {
  names: ['strings'],
  reads: (call) =>
    call.operands.map((f) => call.read(f.text.startsWith('@') ? { ...f, text: f.text.slice(1) } : f)),
};

/** Readers that write the file named by an output option (`sort -o out`). */
export const OUTPUT_OPTION_READERS: ProgramSpec[] = [
  { names: ['sort'], output: ['-o', '--output'], fileOptions: ['--files0-from', '--random-source'] },
  { names: ['iconv'], output: ['-o', '--output'], fileOptions: [] },
  { names: ['tree'], output: ['-o'], fileOptions: ['--fromfile'] },
].map(({ names, output, fileOptions }) => ({
  names,
  effects: (call: ProgramCall) => optionValues(call.args, output).map((w) => call.write(w)),
  reads: readsOperandsAnd(fileOptions),
}));

/** Readers whose second operand is the output file (`uniq in out`, `xxd in out`). */
export const SECOND_OPERAND_WRITERS: ProgramSpec = {
  names: ['uniq', 'xxd'],
  effects: (call) => (call.operands[1] ? [call.write(call.operands[1])] : []),
  reads: readsOperands,
};

export const READER_SPECS = [
  READERS,
  ...FILE_OPTION_READERS,
  STRINGS,
  ...OUTPUT_OPTION_READERS,
  SECOND_OPERAND_WRITERS,
];
