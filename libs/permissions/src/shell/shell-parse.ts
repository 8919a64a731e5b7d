/**
 * A shell command line taken apart the way /bin/sh would run it, so a policy can judge every
 * command in it, not the string as a whole: lists and pipelines (`;` `&&` `||` `|` `&`), groups
 * (`{ ...; }`, `( ... )`), command and process substitution (`$(...)`, backticks, `<(...)`),
 * scripts handed to a shell (`bash -c`, `sh -c`, `eval`, `su -c`, `env -S`), and wrappers that run
 * another command (`sudo`, `env`, `timeout`, `nice`, `nohup`, `xargs`, `command`, `exec`,
 * `find -exec`, ...). Quoting is resolved (`r''m`, `\rm`, `"rm"` are all `rm`); a word whose value
 * is only known at run time (`$X`, `$(...)`) is marked dynamic, one with an unquoted glob (`*.txt`,
 * `/proc/[0-9]*`) is marked glob.
 */

/** The secret a shell command using sudo needs, by name. */
export const SUDO_SECRET = 'sudo_password';

export interface ShellWord {
  /** quotes removed; an expansion (`$X`, `$(...)`) is kept as written */
  text: string;
  /** contains an expansion whose value is only known when it runs */
  dynamic: boolean;
  /** contains an unquoted `*`, `?` or `[...]`: the shell replaces it with the names that match */
  glob?: boolean;
}

/** The part of a word before its first expansion or glob (`/dev/$X` -> `/dev/`, `/etc/pa*` -> `/etc/pa`). */
export const staticPrefix = (w: ShellWord): string =>
  w.dynamic || w.glob ? w.text.split(w.glob ? /[$`<>*?[]/ : /[$`<>]/)[0] : w.text;

export interface ShellRedirect {
  op: string;
  fd: number | null;
  target: ShellWord;
}

export interface ShellCommand {
  /** basename of the program (`/usr/bin/rm` -> `rm`) */
  name: string;
  /** the program as written */
  program: string;
  args: ShellWord[];
  redirects: ShellRedirect[];
  /** `NAME=value` prefixes */
  assignments: string[];
  /** run through sudo/doas/su */
  sudo: boolean;
  /** the program itself is only known at run time (`$CMD`, `$(echo rm)`) */
  dynamic: boolean;
  /** the wrappers and nestings it was found through, outermost first */
  via: string[];
  /** a wrapper (`bash -c`, `eval`, `sudo`, `xargs`, ...) whose inner commands are listed on their own; only its redirects and assignments are its own */
  wrapper: boolean;
}

export interface ShellAnalysis {
  commands: ShellCommand[];
  /** redirects that are not attached to any command (`> file` alone) are in a command named '' */
  errors: string[];
}

type Token =
  | { kind: 'word'; word: ShellWord }
  | { kind: 'op'; op: string }
  | { kind: 'redir'; op: string; fd: number | null };

interface Tokenized {
  tokens: Token[];
  /** scripts inside substitutions, parsed separately */
  nested: { script: string; via: string; /** index of the token it stands in */ at?: number }[];
  errors: string[];
}

const OPS = ['&&', '||', ';;', '|&', ';', '&', '|', '(', ')'];
const REDIRS = ['&>>', '<<<', '<<-', '>>', '<<', '&>', '>&', '<&', '>|', '<>', '<', '>'];
const MAX_DEPTH = 12;

class Reader {
  i = 0;
  constructor(readonly src: string) {}
  get done(): boolean {
    return this.i >= this.src.length;
  }
  peek(k = 0): string {
    return this.src[this.i + k] ?? '';
  }
  startsWith(s: string): boolean {
    return this.src.startsWith(s, this.i);
  }
}

/** Content of `$( ... )` / `<( ... )` / `${ ... }` starting after the opening bracket; quotes and nesting honoured. */
function readBalanced(r: Reader, errors: string[], open = '(', close = ')'): string {
  const start = r.i;
  let depth = 1;
  while (!r.done) {
    const c = r.peek();
    if (c === '\\') {
      r.i += 2;
      continue;
    }
    if (c === "'") {
      const end = r.src.indexOf("'", r.i + 1);
      r.i = end < 0 ? r.src.length : end + 1;
      continue;
    }
    if (c === '"') {
      r.i++;
      readDoubleQuoted(r, { nested: [], errors: [] });
      continue;
    }
    if (c === '`') {
      r.i++;
      readBacktick(r);
      continue;
    }
    if (c === open) depth++;
    if (c === close && --depth === 0) {
      const body = r.src.slice(start, r.i);
      r.i++;
      return body;
    }
    r.i++;
  }
  errors.push(`unbalanced ${open}${close}`);
  return r.src.slice(start);
}

function readBacktick(r: Reader): string {
  let body = '';
  while (!r.done) {
    const c = r.peek();
    if (c === '\\' && ['`', '\\', '$'].includes(r.peek(1))) {
      body += r.peek(1);
      r.i += 2;
      continue;
    }
    r.i++;
    if (c === '`') return body;
    body += c;
  }
  return body;
}

/** `${...}`: the name part is dynamic; substitutions inside a default value are collected. */
function readBraced(r: Reader, sink: Pick<Tokenized, 'nested' | 'errors'>): void {
  collectSubstitutions(readBalanced(r, sink.errors, '{', '}'), sink);
}

/** Substitutions inside text that is otherwise data (a `${x:-$(cmd)}` default, an unquoted heredoc). */
function collectSubstitutions(text: string, sink: Pick<Tokenized, 'nested' | 'errors'>): void {
  const r = new Reader(text);
  while (!r.done) {
    if (r.startsWith('$(') && !r.startsWith('$((')) {
      r.i += 2;
      sink.nested.push({ script: readBalanced(r, sink.errors), via: '$()' });
    } else if (r.peek() === '`') {
      r.i++;
      sink.nested.push({ script: readBacktick(r), via: '``' });
    } else if (r.peek() === '\\') r.i += 2;
    else r.i++;
  }
}

/** After the opening quote; returns the literal value, marks dynamic via the flag object. */
function readDoubleQuoted(
  r: Reader,
  sink: Pick<Tokenized, 'nested' | 'errors'>,
  flag?: { dynamic: boolean },
): string {
  let out = '';
  while (!r.done) {
    const c = r.peek();
    if (c === '"') {
      r.i++;
      return out;
    }
    if (c === '\\') {
      const n = r.peek(1);
      if (['$', '`', '"', '\\'].includes(n)) out += n;
      else if (n !== '\n') out += c + n;
      r.i += 2;
      continue;
    }
    if (c === '$' || c === '`') {
      const expansion = readDollarOrBacktick(r, sink);
      if (expansion !== null) {
        if (flag) flag.dynamic = true;
        out += expansion;
        continue;
      }
    }
    out += c;
    r.i++;
  }
  sink.errors.push('unterminated double quote');
  return out;
}

/** At `$` or a backtick: consumes an expansion and returns its source text, or null for a literal `$`. */
function readDollarOrBacktick(r: Reader, sink: Pick<Tokenized, 'nested' | 'errors'>): string | null {
  const start = r.i;
  return readExpansion(r, sink) ? r.src.slice(start, r.i) : null;
}

function readExpansion(r: Reader, sink: Pick<Tokenized, 'nested' | 'errors'>): boolean {
  if (r.peek() === '`') {
    r.i++;
    sink.nested.push({ script: readBacktick(r), via: '``' });
    return true;
  }
  const n = r.peek(1);
  if (n === '(' && r.peek(2) === '(') {
    r.i += 3;
    collectSubstitutions(readBalanced(r, sink.errors), sink);
    if (r.peek() === ')') r.i++;
    return true;
  }
  if (n === '(') {
    r.i += 2;
    sink.nested.push({ script: readBalanced(r, sink.errors), via: '$()' });
    return true;
  }
  if (n === '{') {
    r.i += 2;
    readBraced(r, sink);
    return true;
  }
  if (/[A-Za-z_]/.test(n)) {
    r.i++;
    while (/[A-Za-z0-9_]/.test(r.peek())) r.i++;
    return true;
  }
  if (/[0-9@*#?$!-]/.test(n)) {
    r.i += 2;
    return true;
  }
  return false;
}

const ANSI_C: Record<string, string> = {
  n: '\n',
  t: '\t',
  r: '\r',
  a: '\x07',
  b: '\b',
  e: '\x1b',
  E: '\x1b',
  f: '\f',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '?': '?',
};

/** `$'...'`, after the opening quote. */
function readAnsiC(r: Reader): string {
  let out = '';
  while (!r.done) {
    const c = r.peek();
    r.i++;
    if (c === "'") return out;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = r.peek();
    r.i++;
    if (ANSI_C[e] !== undefined) out += ANSI_C[e];
    else if (e === 'x') {
      const m = /^[0-9a-fA-F]{1,2}/.exec(r.src.slice(r.i));
      if (m) {
        out += String.fromCharCode(parseInt(m[0], 16));
        r.i += m[0].length;
      }
    } else if (e === 'u' || e === 'U') {
      const m = new RegExp(`^[0-9a-fA-F]{1,${e === 'u' ? 4 : 8}}`).exec(r.src.slice(r.i));
      if (m) {
        out += String.fromCodePoint(parseInt(m[0], 16));
        r.i += m[0].length;
      }
    } else if (/[0-7]/.test(e)) {
      const m = /^[0-7]{1,3}/.exec(r.src.slice(r.i - 1))!;
      out += String.fromCharCode(parseInt(m[0], 8));
      r.i += m[0].length - 1;
    } else out += '\\' + e;
  }
  return out;
}

function tokenize(src: string): Tokenized {
  const t: Tokenized = { tokens: [], nested: [], errors: [] };
  const r = new Reader(src);
  let word = '';
  let inWord = false;
  let dynamic = false;
  /** the word's characters outside quotes and escapes: where a glob can be */
  let unquoted = '';
  const heredocs: { delim: string; strip: boolean; expand: boolean }[] = [];
  let expectHeredocDelim: { strip: boolean } | null = null;
  let delimQuoted = false;

  const flush = () => {
    if (!inWord) return;
    if (expectHeredocDelim) {
      heredocs.push({ delim: word, strip: expectHeredocDelim.strip, expand: !delimQuoted });
      expectHeredocDelim = null;
    }
    const glob = /[*?]|\[.*\]/.test(unquoted);
    t.tokens.push({ kind: 'word', word: glob ? { text: word, dynamic, glob } : { text: word, dynamic } });
    word = '';
    unquoted = '';
    inWord = false;
    dynamic = false;
    delimQuoted = false;
  };

  const readHeredocBodies = () => {
    for (const h of heredocs.splice(0)) {
      let body = '';
      while (!r.done) {
        let end = r.src.indexOf('\n', r.i);
        if (end < 0) end = r.src.length;
        const line = r.src.slice(r.i, end);
        r.i = end + 1;
        if ((h.strip ? line.replace(/^\t+/, '') : line) === h.delim) break;
        body += line + '\n';
      }
      if (h.expand) collectSubstitutions(body, t);
    }
  };

  let stamped = 0;
  const stamp = () => {
    for (; stamped < t.nested.length; stamped++) t.nested[stamped].at = t.tokens.length;
  };
  while (!r.done) {
    stamp();
    const c = r.peek();
    if (c === ' ' || c === '\t') {
      flush();
      r.i++;
      continue;
    }
    if (c === '\n') {
      flush();
      t.tokens.push({ kind: 'op', op: ';' });
      r.i++;
      readHeredocBodies();
      continue;
    }
    if (c === '#' && !inWord) {
      while (!r.done && r.peek() !== '\n') r.i++;
      continue;
    }
    if (c === '\\') {
      if (r.peek(1) !== '\n') {
        word += r.peek(1);
        inWord = true;
      }
      r.i += 2;
      continue;
    }
    if (c === "'") {
      const end = r.src.indexOf("'", r.i + 1);
      if (end < 0) t.errors.push('unterminated single quote');
      word += r.src.slice(r.i + 1, end < 0 ? undefined : end);
      r.i = end < 0 ? r.src.length : end + 1;
      inWord = true;
      delimQuoted = true;
      continue;
    }
    if (c === '"') {
      r.i++;
      const flag = { dynamic: false };
      word += readDoubleQuoted(r, t, flag);
      dynamic ||= flag.dynamic;
      inWord = true;
      delimQuoted = true;
      continue;
    }
    if (c === '$' && r.peek(1) === "'") {
      r.i += 2;
      word += readAnsiC(r);
      inWord = true;
      continue;
    }
    if (c === '$' || c === '`') {
      const expansion = readDollarOrBacktick(r, t);
      if (expansion !== null) {
        word += expansion;
        dynamic = true;
        inWord = true;
        continue;
      }
    }
    if ((c === '<' || c === '>') && r.peek(1) === '(') {
      const start = r.i;
      r.i += 2;
      t.nested.push({ script: readBalanced(r, t.errors), via: `${c}()` });
      word += r.src.slice(start, r.i);
      dynamic = true;
      inWord = true;
      continue;
    }
    const redir = REDIRS.find((op) => r.startsWith(op));
    if (redir) {
      // `2>file`: a word of digits right before the operator is the descriptor
      let fd: number | null = null;
      if (inWord && /^\d+$/.test(word) && !dynamic) {
        fd = Number(word);
        word = '';
        unquoted = '';
        inWord = false;
      } else flush();
      t.tokens.push({ kind: 'redir', op: redir, fd });
      r.i += redir.length;
      if (redir === '<<' || redir === '<<-') expectHeredocDelim = { strip: redir === '<<-' };
      continue;
    }
    const op = OPS.find((o) => r.startsWith(o));
    if (op) {
      flush();
      t.tokens.push({ kind: 'op', op });
      r.i += op.length;
      continue;
    }
    word += c;
    unquoted += c;
    inWord = true;
    r.i++;
  }
  stamp();
  flush();
  return t;
}

interface RawCommand {
  words: ShellWord[];
  redirects: ShellRedirect[];
  /** its output is piped into the next command */
  piped?: boolean;
  /** index of the token that ended it */
  endToken?: number;
}

const RESERVED_PREFIX = new Set([
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'do',
  'done',
  'while',
  'until',
  '!',
  '{',
  '}',
  'time',
  'function',
  'esac',
  'coproc',
]);

function segment(tokens: Token[], errors: string[]): RawCommand[] {
  const out: RawCommand[] = [];
  let cur: RawCommand = { words: [], redirects: [] };
  let skipUntilOp = false;
  const end = (at: number, op?: string) => {
    if (op === '|' || op === '|&') cur.piped = true;
    cur.endToken = at;
    if (!skipUntilOp && (cur.words.length || cur.redirects.length)) out.push(cur);
    cur = { words: [], redirects: [] };
    skipUntilOp = false;
  };
  for (let k = 0; k < tokens.length; k++) {
    const tok = tokens[k];
    if (tok.kind === 'op') {
      end(k, tok.op);
      continue;
    }
    if (tok.kind === 'redir') {
      const next = tokens[k + 1];
      if (next?.kind === 'word') {
        cur.redirects.push({ op: tok.op, fd: tok.fd, target: next.word });
        k++;
      } else errors.push(`redirect ${tok.op} without a target`);
      continue;
    }
    if (cur.words.length === 0 && !tok.word.dynamic) {
      if (RESERVED_PREFIX.has(tok.word.text)) continue;
      // `for x in a b c` / `select` / `case w in`: words that are data, not a command
      if (tok.word.text === 'for' || tok.word.text === 'select' || tok.word.text === 'case')
        skipUntilOp = true;
    }
    cur.words.push(tok.word);
  }
  end(tokens.length);
  return out;
}

const isAssignment = (w: ShellWord): boolean => /^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=/.test(w.text);
const basename = (p: string): string => p.replace(/\/+$/, '').split('/').pop() ?? p;

/** Options of a wrapper that take a value (so the value is not mistaken for the command). */
const WRAPPERS: Record<string, { valued: string[]; positional?: number; sudo?: boolean }> = {
  sudo: { valued: ['-u', '-g', '-h', '-p', '-C', '-D', '-r', '-t', '-U', '-T', '-R'], sudo: true },
  doas: { valued: ['-u', '-C'], sudo: true },
  pkexec: { valued: ['--user'], sudo: true },
  timeout: { valued: ['-s', '-k', '--signal', '--kill-after'], positional: 1 },
  nice: { valued: ['-n', '--adjustment'] },
  nohup: { valued: [] },
  setsid: { valued: [] },
  stdbuf: { valued: ['-i', '-o', '-e'] },
  ionice: { valued: ['-c', '-n', '-p', '-P', '-u'] },
  chrt: { valued: [], positional: 1 },
  taskset: { valued: [], positional: 1 },
  command: { valued: [] },
  builtin: { valued: [] },
  exec: { valued: ['-a'] },
  unbuffer: { valued: [] },
  time: { valued: ['-f', '-o', '--format', '--output'] },
  chroot: { valued: ['--userspec', '--groups'], positional: 1 },
  flock: { valued: ['-w', '--timeout', '-E', '--conflict-exit-code'], positional: 1 },
  xargs: {
    valued: [
      '-I',
      '-L',
      '-n',
      '-P',
      '-d',
      '-E',
      '-s',
      '-a',
      '-i',
      '-l',
      '-e',
      '--max-args',
      '--max-procs',
      '--delimiter',
      '--arg-file',
      '--replace',
      '--max-lines',
      '--eof',
    ],
  },
  watch: { valued: ['-n', '-d', '--interval', '--differences'] },
  strace: { valued: ['-e', '-o', '-p', '-s', '-u'] },
  ltrace: { valued: ['-e', '-o', '-p', '-s', '-u'] },
  catchsegv: { valued: [] },
  nsenter: { valued: ['-t', '--target'] },
  unshare: { valued: [] },
  firejail: { valued: [] },
  'run-parts': { valued: [] },
};

const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'fish', 'csh', 'tcsh', 'rbash']);

/** Every command `command` would run, wrappers and nestings unfolded. Never throws. */
export function analyzeShell(command: string): ShellAnalysis {
  const commands: ShellCommand[] = [];
  const errors: string[] = [];
  analyzeInto(command, { via: [], sudo: false, depth: 0, out: commands, errors });
  return { commands, errors };
}

/** Where the unfolding stands: the wrappers it came through, under sudo or not, how deep, and where its findings go. */
interface Walk {
  via: string[];
  sudo: boolean;
  depth: number;
  out: ShellCommand[];
  errors: string[];
}

/** One level further in, through `how`. */
const deeper = (walk: Walk, how: string, sudo = walk.sudo): Walk => ({
  ...walk,
  via: [...walk.via, how],
  sudo,
  depth: walk.depth + 1,
});

function analyzeInto(script: string, walk: Walk): void {
  const { depth, errors } = walk;
  if (depth > MAX_DEPTH) {
    errors.push('nesting too deep');
    return;
  }
  const t = tokenize(script);
  errors.push(...t.errors);
  // substitutions run just before the command they stand in: keep that order for the policy
  let nextNested = 0;
  const nestedUpTo = (token: number) => {
    for (; nextNested < t.nested.length && (t.nested[nextNested].at ?? 0) <= token; nextNested++) {
      const n = t.nested[nextNested];
      analyzeInto(n.script, deeper(walk, n.via));
    }
  };
  const raws = segment(t.tokens, errors);
  raws.forEach((raw, k) => {
    nestedUpTo(raw.endToken ?? t.tokens.length);
    unwrap(raw.words, raw.redirects, walk);
    // `echo 'rm -rf /' | sh`: the printed text is the script the shell runs
    const next = raws[k + 1];
    if (
      raw.piped &&
      next &&
      ['echo', 'printf'].includes(raw.words[0]?.text ?? '') &&
      SHELLS.has(basename(next.words[0]?.text ?? '')) &&
      !next.words.some((w) => /^-[a-zA-Z]*c/.test(w.text))
    ) {
      analyzeInto(
        raw.words
          .slice(1)
          .filter((w) => !/^-[neE]+$/.test(w.text))
          .map((w) => w.text)
          .join(' '),
        deeper(walk, 'pipe to shell'),
      );
    }
  });
  nestedUpTo(Number.POSITIVE_INFINITY);
}

function unwrap(words: ShellWord[], redirects: ShellRedirect[], walk: Walk): void {
  const { via, sudo, out } = walk;
  const assignments: string[] = [];
  let k = 0;
  while (k < words.length && isAssignment(words[k])) assignments.push(words[k++].text);
  if (k >= words.length) {
    // kept even without redirects: a policy may follow `X=/; rm -rf $X`
    if (redirects.length || assignments.length)
      out.push({
        name: '',
        program: '',
        args: [],
        redirects,
        assignments,
        sudo,
        dynamic: false,
        via,
        wrapper: false,
      });
    return;
  }
  const head = words[k];
  const rest = words.slice(k + 1);
  const name = basename(head.text);
  const emit = (wrapper = false): void => {
    out.push({
      name: head.dynamic ? head.text : name,
      program: head.text,
      args: rest,
      redirects,
      assignments,
      sudo,
      dynamic: head.dynamic,
      via,
      wrapper,
    });
  };
  if (head.dynamic) return emit();
  const recurse = (script: string, how: string, asSudo = sudo) =>
    analyzeInto(script, deeper(walk, how, asSudo));
  const inner = (w: ShellWord[], how: string, asSudo = sudo) => {
    if (w.length) unwrap(w, redirects, deeper(walk, how, asSudo));
    else emit();
  };

  if (name === 'busybox' && rest.length) return inner(rest, 'busybox');
  if (name === 'eval') {
    emit(true);
    return recurse(rest.map((w) => w.text).join(' '), 'eval');
  }
  if (SHELLS.has(name)) {
    const cIndex = rest.findIndex((w) => /^-[a-zA-Z]*c[a-zA-Z]*$/.test(w.text) || w.text === '--command');
    if (cIndex >= 0) {
      const scriptWord = rest.slice(cIndex + 1).find((w) => !w.text.startsWith('-'));
      emit(scriptWord !== undefined);
      if (scriptWord) return recurse(scriptWord.text, `${name} -c`);
      return;
    }
    return emit();
  }
  if (name === 'su') {
    const cIndex = rest.findIndex((w) => w.text === '-c' || w.text === '--command');
    const script = cIndex >= 0 ? rest[cIndex + 1] : undefined;
    emit(script !== undefined);
    if (script) recurse(script.text, 'su -c', true);
    return;
  }
  if (name === 'env') {
    let j = 0;
    while (j < rest.length) {
      const w = rest[j].text;
      if (w === '--') {
        j++;
        break;
      }
      if (w.startsWith('-S') || w.startsWith('--split-string')) emit(true);
      if (w === '-S' || w === '--split-string')
        return recurse(
          rest
            .slice(j + 1)
            .map((x) => x.text)
            .join(' '),
          'env -S',
        );
      if (w.startsWith('--split-string='))
        return recurse([w.slice(15), ...rest.slice(j + 1).map((x) => x.text)].join(' '), 'env -S');
      if (/^-S./.test(w))
        return recurse([w.slice(2), ...rest.slice(j + 1).map((x) => x.text)].join(' '), 'env -S');
      if (['-u', '-C', '-P', '--unset', '--chdir'].includes(w)) j += 2;
      else if (w.startsWith('-') || isAssignment(rest[j])) j++;
      else break;
    }
    if (j >= rest.length) return emit();
    return inner(rest.slice(j), 'env');
  }
  if (name === 'find') {
    emit();
    for (let j = 0; j < rest.length; j++) {
      if (['-exec', '-execdir', '-ok', '-okdir'].includes(rest[j].text)) {
        let e = j + 1;
        while (e < rest.length && rest[e].text !== ';' && rest[e].text !== '+') e++;
        inner(rest.slice(j + 1, e), 'find -exec');
        j = e;
      }
    }
    return;
  }
  if (name === 'watch') {
    let j = 0;
    while (j < rest.length && rest[j].text.startsWith('-'))
      j += WRAPPERS.watch.valued.includes(rest[j].text) ? 2 : 1;
    emit(true);
    return recurse(
      rest
        .slice(j)
        .map((w) => w.text)
        .join(' '),
      'watch',
    );
  }
  if (name === 'flock') {
    const cIndex = rest.findIndex((w) => w.text === '-c' || w.text === '--command');
    if (cIndex >= 0 && rest[cIndex + 1]) {
      emit(true);
      return recurse(rest[cIndex + 1].text, 'flock -c');
    }
  }
  const wrapper = WRAPPERS[name];
  if (wrapper) {
    let j = 0;
    while (j < rest.length) {
      const w = rest[j].text;
      if (w === '--') {
        j++;
        break;
      }
      if (!w.startsWith('-') || w === '-') break;
      if (wrapper.valued.includes(w)) j += 2;
      else j++;
    }
    j += wrapper.positional ?? 0;
    if (name === 'command' && rest.some((w) => w.text === '-v' || w.text === '-V')) return emit();
    if (j >= rest.length) {
      if (name === 'sudo' && rest.some((w) => w.text === '-s' || w.text === '-i')) {
        out.push({
          name: 'sh',
          program: 'sh',
          args: [],
          redirects,
          assignments,
          sudo: true,
          dynamic: false,
          via: [...via, 'sudo'],
          wrapper: false,
        });
        return;
      }
      return emit();
    }
    emit(true);
    return inner(rest.slice(j), name, sudo || wrapper.sudo === true);
  }
  emit();
}

/** Whether running `command` would invoke sudo (or doas/su/pkexec) anywhere in it. */
export function commandUsesSudo(command: string): boolean {
  return analyzeShell(command).commands.some(
    (c) => c.sudo || ['sudo', 'doas', 'su', 'pkexec'].includes(c.name),
  );
}
