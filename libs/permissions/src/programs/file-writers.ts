import { PermissionCheck } from '@runledger/contracts';
import { ShellWord } from '../shell/shell-parse';
import { BLOCK_DEVICE } from '../system-paths';
import { check, ProgramCall, ProgramSpec } from './program-spec';

const changesFiles = (name: string): PermissionCheck =>
  check('prompt', 'write_program', `${name} changes files`);

/**
 * The write checks every file-changing program shares: each target is judged as a write, and the
 * program asks first. Deleting is remembered apart from writing: an allow_always for writes does
 * not cover rm.
 */
export function fileWrites(
  call: ProgramCall,
  targets: ShellWord[],
  options: { deletes?: boolean; sources?: ShellWord[] } = {},
) {
  const found: PermissionCheck[] = [];
  if (options.deletes) found.push(check('prompt', 'delete_program', `${call.name} deletes files`));
  for (const t of targets) found.push(call.write(t));
  for (const s of options.sources ?? []) found.push(call.read(s));
  found.push(changesFiles(call.name));
  return found;
}

/** `rm -rf /`, `shred /dev/sda`: recursive removal of a system folder or a block device. */
export const REMOVERS: ProgramSpec = {
  names: ['rm', 'rmdir', 'unlink', 'shred'],
  decide: (call) => {
    const { name, words, operands, has, shortFlag } = call;
    const recursive = has('--recursive', '-r', '-R') || shortFlag('r') || shortFlag('R') || name === 'rmdir';
    if (has('--no-preserve-root')) return check('hard_stop', 'rm_root', 'rm --no-preserve-root');
    for (const o of operands) {
      if ((recursive || name === 'shred') && call.catastrophic(o))
        return check('hard_stop', 'rm_root', `${name} ${words.join(' ')} wipes ${o.text}`);
      if (name === 'shred' && BLOCK_DEVICE.test(call.resolve(o.text)))
        return check('hard_stop', 'write_block_device', `shreds ${o.text}`);
    }
    return null;
  },
  effects: (call) => fileWrites(call, call.operands, { deletes: true }),
};

/** The first operand of chmod/chown/chgrp is the mode or owner, not a path. */
const takesModeFirst = (name: string) => name === 'chmod' || name === 'chown' || name === 'chgrp';

/** Mode and owner changes; `chmod -R 777 /` is a hard stop. */
export const ATTRIBUTE_CHANGERS: ProgramSpec = {
  names: ['chmod', 'chown', 'chgrp', 'chattr', 'setfacl'],
  decide: (call) => {
    const recursive = call.has('--recursive', '-R') || call.shortFlag('R');
    for (const o of call.operands.slice(takesModeFirst(call.name) ? 1 : 0)) {
      if ((recursive || o.text.replace(/\/+$/, '') === '') && call.catastrophic(o))
        return check('hard_stop', 'chmod_root', `${call.name} on ${o.text}`);
    }
    return null;
  },
  effects: (call) => fileWrites(call, call.operands.slice(takesModeFirst(call.name) ? 1 : 0)),
};

/** `mv /etc x` moves a system folder away; every operand changes. */
export const MV: ProgramSpec = {
  names: ['mv'],
  decide: (call) => {
    for (const o of call.operands)
      if (call.catastrophic(o)) return check('hard_stop', 'mv_root', `moves ${o.text}`);
    return null;
  },
  effects: (call) => fileWrites(call, call.operands, { sources: call.operands.slice(0, -1) }),
};

/** Programs that create or change every path they are given. */
export const WRITERS: ProgramSpec = {
  names: ['touch', 'truncate', 'mkdir', 'tee', 'mkfifo', 'mknod'],
  effects: (call) => fileWrites(call, call.operands),
};

/** Programs that write their last operand (or the `-t` folder) and read the rest. */
export const COPIERS: ProgramSpec = {
  names: ['cp', 'install', 'ln', 'rsync', 'scp'],
  effects: (call) => {
    const t = call.args.findIndex((a) => a.text === '-t' || a.text === '--target-directory');
    const targets = t >= 0 && call.args[t + 1] ? [call.args[t + 1]] : call.operands.slice(-1);
    // a link's target is where later commands reach through it: judged as a read of that place
    return fileWrites(call, targets, {
      sources: call.name === 'cp' || call.name === 'ln' ? call.operands.slice(0, -1) : [],
    });
  },
};

/** `dd if=... of=...`: always asks; `of=` is a write, `if=` a read. */
export const DD: ProgramSpec = {
  names: ['dd'],
  effects: (call) => {
    const found: PermissionCheck[] = [];
    for (const w of call.words) {
      if (w.startsWith('of=')) found.push(call.write({ text: w.slice(3), dynamic: false }));
      if (w.startsWith('if=')) found.push(call.read({ text: w.slice(3), dynamic: false }));
    }
    found.push(check('prompt', 'write_program', 'dd writes data'));
    return found;
  },
};

export const FILE_WRITER_SPECS = [REMOVERS, ATTRIBUTE_CHANGERS, MV, WRITERS, COPIERS, DD];
