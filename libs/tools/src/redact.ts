/**
 * Secret redaction for anything a tool hands back. A secret leaks in practice not only verbatim
 * but re-encoded by the command that printed it (`echo pw | base64`, basic auth `user:pw`,
 * a URL, a JSON document, a wrapped line), so every secret is turned into a set of patterns that
 * match those encodings too.
 */
export const REDACTED = '[REDACTED]';

/** What a hidden match is replaced by. */
export type Mask = (match: string) => string;

const redactedMask: Mask = () => REDACTED;

/**
 * `[REDACTED**]`, as long as what it hides (`***` below ten characters): lengths derived from the
 * text (a prompt's size, a token estimate) stay what they were, so a scrubbed log still replays.
 */
export const sameLengthMask: Mask = (match) =>
  match.length < REDACTED.length
    ? '*'.repeat(match.length)
    : `${REDACTED.slice(0, -1)}${'*'.repeat(match.length - REDACTED.length)}]`;

/** Base64 forms shorter than this are not matched: they would wipe unrelated text. */
const MIN_BASE64_CORE = 4;
/** A line break a printer may insert inside a value (base64 -w76, folded headers, JSON "\n"). */
const BREAK = '(?:\\r?\\n|\\\\n|\\\\r\\\\n)?';

const escapeRe = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

const hex2 = (b: number): string => b.toString(16).padStart(2, '0');
/** `%2f` and `%2F` alike. */
const pctByte = (b: number): string => {
  const h = hex2(b);
  return `%[${h[0]}${h[0].toUpperCase()}][${h[1]}${h[1].toUpperCase()}]`;
};

const JSON_SHORT: Record<string, string> = {
  '"': '\\\\"',
  '\\': '\\\\\\\\',
  '/': '\\\\/',
  '\n': '\\\\n',
  '\r': '\\\\r',
  '\t': '\\\\t',
  '\b': '\\\\b',
  '\f': '\\\\f',
};

/** One character of the secret in any of: literal, percent-encoded, JSON/\u-escaped, form `+`. */
function charPattern(ch: string): string {
  const alts = new Set<string>([escapeRe(ch)]);
  const bytes = Buffer.from(ch, 'utf8');
  alts.add([...bytes].map(pctByte).join(''));
  const code = ch.codePointAt(0)!;
  if (code <= 0xffff)
    alts.add(
      `\\\\u${code
        .toString(16)
        .padStart(4, '0')
        .split('')
        .map((c) => (/[a-f]/.test(c) ? `[${c}${c.toUpperCase()}]` : c))
        .join('')}`,
    );
  if (JSON_SHORT[ch]) alts.add(JSON_SHORT[ch]);
  if (ch === ' ') alts.add('\\+');
  return alts.size === 1 ? [...alts][0] : `(?:${[...alts].join('|')})`;
}

/** The secret literally or per character encoded, possibly broken across lines. */
function textPattern(secret: string): string {
  return [...secret].map(charPattern).join(BREAK);
}

/**
 * The base64 characters that depend only on the secret's bits, for the secret starting at byte
 * offset 0, 1 or 2 of a 3-byte group: whatever precedes it (`user:`) or follows it (`\n`, `:`),
 * these characters are in the encoding. One neighbouring character each side is swallowed too,
 * since it carries a few bits of the secret.
 */
function base64Patterns(secret: Buffer, alphabet: 'base64' | 'base64url'): string[] {
  const out: string[] = [];
  const cls = alphabet === 'base64' ? '[A-Za-z0-9+/]' : '[A-Za-z0-9_-]';
  for (let k = 0; k < 3; k++) {
    const buf = Buffer.concat([Buffer.alloc(k), secret, Buffer.alloc(2)]);
    const enc = buf.toString(alphabet);
    const startBit = 8 * k;
    const endBit = 8 * (k + secret.length);
    let core = '';
    for (let i = 0; i * 6 + 6 <= endBit; i++) if (i * 6 >= startBit) core += enc[i];
    if (core.length < MIN_BASE64_CORE) continue;
    const inner = [...core].map(escapeRe).join(BREAK);
    out.push(`${cls}?${BREAK}${inner}${BREAK}${cls}{0,2}={0,2}`);
  }
  return out;
}

function hexPatterns(secret: Buffer): string[] {
  if (secret.length < 2) return [];
  const h = secret.toString('hex');
  return [
    h
      .split('')
      .map((c) => (/[a-f]/.test(c) ? `[${c}${c.toUpperCase()}]` : c))
      .join(BREAK),
  ];
}

const cache = new Map<string, RegExp>();

/** One regex per secret matching all its encodings; the longest alternatives first. */
function secretRegex(secret: string): RegExp {
  const hit = cache.get(secret);
  if (hit) return hit;
  const bytes = Buffer.from(secret, 'utf8');
  const alts = [
    ...base64Patterns(bytes, 'base64'),
    ...base64Patterns(bytes, 'base64url'),
    ...hexPatterns(bytes),
    textPattern(secret),
  ];
  const re = new RegExp(alts.map((a) => `(?:${a})`).join('|'), 'g');
  if (cache.size > 256) cache.clear();
  cache.set(secret, re);
  return re;
}

export function redactString(text: string, secrets: readonly string[], mask: Mask = redactedMask): string {
  let out = text;
  for (const s of secrets) {
    if (!s) continue;
    out = out.replace(secretRegex(s), mask);
    out = redactCutPrefix(out, s, mask);
  }
  return out;
}

/** Output capped in the middle of a secret ends with its first characters: those go too. */
function redactCutPrefix(text: string, secret: string, mask: Mask): string {
  for (let k = secret.length - 1; k >= MIN_BASE64_CORE; k--) {
    if (text.endsWith(secret.slice(0, k))) return text.slice(0, text.length - k) + mask(secret.slice(0, k));
  }
  return text;
}

/**
 * Deep copy of `value` with every occurrence of every secret (in any encoding above) replaced by
 * `[REDACTED]`, in strings and object keys alike. Non-JSON leaves (numbers, booleans) pass through.
 */
export function redactSecrets<T>(value: T, secrets: readonly string[], mask: Mask = redactedMask): T {
  const live = [...new Set(secrets.filter((s) => s.length > 0))].sort((a, b) => b.length - a.length);
  if (live.length === 0) return value;
  return walk(value, (text) => redactString(text, live, mask)) as T;
}

/** Deep copy of `value` with every match of every pattern (global regexes) masked, in strings and keys alike. */
export function redactPatterns<T>(value: T, patterns: readonly RegExp[], mask: Mask = redactedMask): T {
  if (patterns.length === 0) return value;
  const global = patterns.map((p) => (p.global ? p : new RegExp(p.source, `${p.flags}g`)));
  return walk(value, (text) => global.reduce((out, p) => out.replace(p, mask), text)) as T;
}

function walk(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === 'string') return redact(value);
  if (Buffer.isBuffer(value)) return redact(value.toString('utf8'));
  if (Array.isArray(value)) return value.map((v) => walk(v, redact));
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([k, v]) => [redact(k), walk(v, redact)]),
    );
  }
  return value;
}
