import { PermissionCheck, PermissionVerdict } from '@runledger/contracts';
import { ShellCommand, ShellWord } from '../shell/shell-parse';

export const check = (verdict: PermissionVerdict, rule: string | null, reason: string): PermissionCheck => ({
  verdict,
  rule,
  reason,
});
export const ALLOW = check('allow', null, 'allowed');

/** How a program that no spec knows is judged: it asks first. */
export const unknownProgram = (name: string): PermissionCheck =>
  check('prompt', 'unknown_program', `${name} is not a known read-only program`);

/** What a spec may ask about the paths a command names; answers are relative to the command's folder. */
export interface PathJudge {
  /** a read of this path: allow inside the root, prompt outside it */
  read(word: ShellWord): PermissionCheck;
  /** a write to this path: hard stop for system paths, deny outside the root, allow or prompt inside */
  write(word: ShellWord): PermissionCheck;
  /** `/`, `~`, `/usr`, `/etc/*`: a target whose recursive removal wrecks the machine */
  catastrophic(word: ShellWord): boolean;
  /** the absolute path as written (no symlinks followed) */
  resolve(text: string): string;
}

/** One command, taken apart the way the specs need it. */
export interface ProgramCall extends PathJudge {
  name: string;
  args: ShellWord[];
  /** the arguments' texts */
  words: string[];
  /** arguments that are not options (`--` ends options) */
  operands: ShellWord[];
  /** one of these arguments is given exactly */
  has(...flags: string[]): boolean;
  /** a cluster of short options (`-rf`) contains this letter */
  shortFlag(letter: string): boolean;
}

/**
 * One program's permission rules, in the spirit of Codex's execpolicy: which of its arguments
 * read, which write, which are never allowed. The policy engine walks a table of these.
 */
export interface ProgramSpec {
  readonly names: readonly string[];
  /** names matched by pattern rather than listed (`mkfs.ext4`) */
  readonly namePattern?: RegExp;
  /** A verdict that settles the call on its own (a hard stop, say), or null to judge it further. */
  readonly decide?: (call: ProgramCall) => PermissionCheck | null;
  /** Checks that always apply: writes, deletes, network use, side effects. */
  readonly effects?: (call: ProgramCall) => PermissionCheck[];
  /** The files it reads; waived when the operator lists the program in `allow_programs`. */
  readonly reads?: (call: ProgramCall) => PermissionCheck[];
}

/** Non-option arguments (`--` ends options). */
export function operandsOf(args: readonly ShellWord[]): ShellWord[] {
  const out: ShellWord[] = [];
  let opts = true;
  for (const a of args) {
    if (opts && a.text === '--') {
      opts = false;
      continue;
    }
    if (opts && a.text.startsWith('-') && a.text !== '-' && !a.dynamic) continue;
    out.push(a);
  }
  return out;
}

/**
 * The values given to any of `options`, in order: `-o FILE`, `-oFILE`, `-uo FILE` (a short option
 * at the end of a cluster), `--output FILE`, `--output=FILE`.
 */
export function optionValues(args: readonly ShellWord[], options: readonly string[]): ShellWord[] {
  const values: ShellWord[] = [];
  const letters = options.filter((o) => /^-[a-zA-Z]$/.test(o)).map((o) => o[1]);
  const longs = options.filter((o) => o.startsWith('--'));
  const cluster = letters.length ? new RegExp(`^-[a-zA-Z]*?[${letters.join('')}](.*)$`, 's') : null;
  for (const [i, a] of args.entries()) {
    if (a.text === '--') break;
    const long = longs.find((o) => a.text === o || a.text.startsWith(`${o}=`));
    const attached = long ? a.text.slice(long.length + 1) : cluster?.exec(a.text)?.[1];
    if (attached === undefined) continue;
    if (attached !== '') values.push({ ...a, text: attached });
    else if (args[i + 1]) values.push(args[i + 1]);
  }
  return values;
}

/** Reads of the files named by these options (`date -f FILE`, `grep --file=FILE`). */
export const optionReads = (call: ProgramCall, options: readonly string[]): PermissionCheck[] =>
  optionValues(call.args, options).map((w) => call.read(w));

export function newProgramCall(command: ShellCommand, paths: PathJudge): ProgramCall {
  const args = command.args;
  const words = args.map((a) => a.text);
  return {
    name: command.name,
    args,
    words,
    operands: operandsOf(args),
    has: (...flags) => words.some((w) => flags.includes(w)),
    shortFlag: (letter) => words.some((w) => /^-[a-zA-Z]+$/.test(w) && w.includes(letter)),
    read: (w) => paths.read(w),
    write: (w) => paths.write(w),
    catastrophic: (w) => paths.catastrophic(w),
    resolve: (t) => paths.resolve(t),
  };
}
