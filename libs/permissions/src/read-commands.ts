import { check } from './programs/program-spec';
import { newProgramCall, ProgramSpec } from './programs/program-spec';
import { FILE_WRITER_SPECS } from './programs/file-writers';
import { MACHINE_SPECS } from './programs/machine';
import { NETWORK } from './programs/network';
import { programSpec } from './programs/table';
import { analyzeShell, ShellCommand, ShellRedirect } from './shell/shell-parse';
import { HARMLESS_SINKS } from './system-paths';

/** Specs of programs that write, delete, reach the network or act on the machine, whatever their arguments. */
const NEVER_READ_ONLY: ReadonlySet<ProgramSpec> = new Set([...FILE_WRITER_SPECS, ...MACHINE_SPECS, NETWORK]);
const WRITE_REDIRECTS = ['>', '>>', '>|', '&>', '&>>', '>&', '<>'];

/** A redirect that writes a file: anything but a duplicated descriptor or a harmless sink (`2>/dev/null`). */
const writes = (r: ShellRedirect): boolean =>
  WRITE_REDIRECTS.includes(r.op) &&
  !(/^(\d+|-)$/.test(r.target.text) && (r.op === '>&' || r.op === '<&')) &&
  !(!r.target.dynamic && HARMLESS_SINKS.has(r.target.text));

/**
 * One command of a line only reads: a program the tables know, none of whose arguments the tables
 * judge as a write or a side effect (`git status` reads, `git commit` does not; `find -delete`,
 * `sed -i`, `find -fprint F` write), no redirect that writes, no sudo, no variables set.
 */
function readsOnly(c: ShellCommand): boolean {
  if (c.dynamic || c.sudo || c.assignments.length > 0 || c.redirects.some(writes)) return false;
  // a wrapper's inner commands are judged on their own (xargs runs what its input names: unknown)
  if (c.wrapper) return c.name !== 'xargs';
  if (c.name === '' || c.name === 'cd') return true;
  const spec = programSpec(c.name);
  if (!spec || NEVER_READ_ONLY.has(spec)) return false;
  let wrote = false;
  const call = newProgramCall(c, {
    read: () => check('allow', null, 'reads'),
    write: () => {
      wrote = true;
      return check('prompt', 'write', 'writes');
    },
    catastrophic: () => false,
    resolve: (t) => t,
  });
  const decided = spec.decide?.(call) ?? null;
  if (decided && decided.verdict !== 'allow') return false;
  const effects = spec.effects?.(call) ?? [];
  return !wrote && effects.every((e) => e.verdict === 'allow');
}

/**
 * Whether a shell command line only reads, as the permission tables classify its programs: every
 * command in it (pipelines, lists, substitutions and wrapped commands included) reads only. What
 * it may read (inside the allowed root or not) is the permission policy's to judge, not this.
 */
export function isReadOnlyCommand(command: string): boolean {
  const analysis = analyzeShell(command);
  if (analysis.errors.length > 0 || analysis.commands.length === 0) return false;
  return analysis.commands.every(readsOnly);
}
