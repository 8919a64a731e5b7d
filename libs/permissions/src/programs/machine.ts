import { check, ProgramSpec, unknownProgram } from './program-spec';

/** Programs that format disks or stop the machine: never run. */
export const MACHINE_WRECKERS: ProgramSpec = {
  names: [
    'mkfs',
    'mke2fs',
    'mkswap',
    'mkdosfs',
    'mkntfs',
    'wipefs',
    'shutdown',
    'reboot',
    'halt',
    'poweroff',
    'telinit',
    'kexec',
    'killall5',
  ],
  namePattern: /^mkfs\./,
  decide: ({ name }) =>
    check('hard_stop', `program_${name.replace(/\W/g, '_')}`, `${name} destroys data or stops the machine`),
};

/** `init 0`, `init 6`, `init s`: changes the run level. */
export const INIT: ProgramSpec = {
  names: ['init'],
  decide: ({ operands }) =>
    operands.some((o) => /^[06sS]$/.test(o.text))
      ? check('hard_stop', 'program_init', 'changes the run level')
      : null,
  effects: ({ name }) => [unknownProgram(name)],
};

export const SYSTEMCTL: ProgramSpec = {
  names: ['systemctl'],
  decide: ({ operands }) =>
    operands.some((o) => /^(poweroff|reboot|halt|kexec|emergency|rescue|suspend|hibernate)$/.test(o.text))
      ? check('hard_stop', 'systemctl_power', 'stops the machine')
      : null,
  effects: ({ name }) => [unknownProgram(name)],
};

/** Partition tools: listing the table asks, anything else rewrites disks. */
export const DISK_TOOLS: ProgramSpec = {
  names: ['fdisk', 'sfdisk', 'cfdisk', 'parted', 'gdisk', 'sgdisk', 'blkdiscard', 'hdparm'],
  decide: ({ name, has }) =>
    has('-l', '--list', 'print')
      ? check('prompt', 'disk_tool', `${name} reads the partition table`)
      : check('hard_stop', 'disk_tool', `${name} rewrites disks`),
};

/** `kill -9 -1` kills every process, `kill 1` init. */
export const KILL: ProgramSpec = {
  names: ['kill', 'pkill'],
  decide: ({ words, operands }) =>
    words.slice(1).includes('-1') || operands.some((o) => o.text === '-1' || o.text === '1')
      ? check('hard_stop', 'kill_all', 'kills every process or init')
      : null,
  effects: ({ name }) => [unknownProgram(name)],
};

export const MACHINE_SPECS = [MACHINE_WRECKERS, INIT, SYSTEMCTL, DISK_TOOLS, KILL];
