import { optionReads, ProgramSpec } from './program-spec';

/** `date -f FILE` reads dates from a file (and prints what it cannot parse). */
export const DATE: ProgramSpec = {
  names: ['date'],
  reads: (call) => optionReads(call, ['-f', '--file']),
};

/** `hostname -F FILE` reads the name from a file. */
export const HOSTNAME: ProgramSpec = {
  names: ['hostname'],
  reads: (call) => optionReads(call, ['-F', '--file']),
};

/** Programs and shell builtins that read no files: always allowed. */
export const PURE: ProgramSpec = {
  names: [
    'echo',
    'printf',
    'pwd',
    'true',
    'false',
    'test',
    '[',
    'seq',
    'sleep',
    'yes',
    'whoami',
    'id',
    'uname',
    'uptime',
    'which',
    'type',
    'printenv',
    'env',
    'nproc',
    'arch',
    'tty',
    'expr',
    'cal',
    'locale',
    'groups',
    'getconf',
    'command',
    ':',
    'exit',
    'return',
    'cd',
    'set',
    'shift',
    'read',
    'wait',
    'local',
    'declare',
    'export',
    'unset',
    'alias',
  ],
};

export const PURE_SPECS = [PURE, DATE, HOSTNAME];
