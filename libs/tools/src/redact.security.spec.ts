import { REDACTED, redactSecrets } from './redact';

const SECRETS = [
  'hunter2-pass',
  'p@ss w0rd/+=?&"\\x',
  'ünïcødé-sëcret',
  'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
  'Zx9!',
  'Tr0ub4dor&3',
];

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const b64url = (s: string) => Buffer.from(s, 'utf8').toString('base64url');
const wrap76 = (s: string) => s.replace(/(.{76})/g, '$1\n');
const pctAll = (s: string, upper: boolean) =>
  [...Buffer.from(s, 'utf8')]
    .map((b) => `%${b.toString(16).padStart(2, '0')}`)
    .map((x) => (upper ? x.toUpperCase() : x))
    .join('');
const jsonU = (s: string) =>
  [...s].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');

/** How a secret reaches tool output in practice. */
const ENCODINGS: [string, (s: string) => string][] = [
  ['plain', (s) => s],
  ['base64', b64],
  ['base64 of secret + newline (echo pw | base64)', (s) => b64(`${s}\n`)],
  ['base64 of secret + colon', (s) => b64(`${s}:`)],
  ['base64 of user:secret (basic auth)', (s) => `Authorization: Basic ${b64(`user:${s}`)}`],
  ['base64 at offset 1', (s) => b64(`x${s}`)],
  ['base64 at offset 2', (s) => b64(`xy${s}yz`)],
  [
    'base64 wrapped at 76 columns',
    (s) => wrap76(b64(`${'lorem ipsum '.repeat(6)}${s}${' dolor'.repeat(10)}`)),
  ],
  ['base64url', b64url],
  ['base64url of user:secret', (s) => b64url(`user:${s}`)],
  ['hex lower', (s) => Buffer.from(s).toString('hex')],
  ['hex upper', (s) => Buffer.from(s).toString('hex').toUpperCase()],
  ['encodeURIComponent', (s) => `https://api.example.com/?token=${encodeURIComponent(s)}&x=1`],
  ['percent every byte, lower', (s) => pctAll(s, false)],
  ['percent every byte, upper', (s) => pctAll(s, true)],
  ['form encoding', (s) => new URLSearchParams({ pw: s }).toString()],
  ['JSON-escaped', (s) => JSON.stringify({ password: s })],
  ['JSON \\u-escaped', (s) => `{"password":"${jsonU(s)}"}`],
  [
    'split across lines',
    (s) => `${s.slice(0, Math.ceil(s.length / 2))}\n${s.slice(Math.ceil(s.length / 2))}`,
  ],
  ['split with CRLF', (s) => `${s.slice(0, 3)}\r\n${s.slice(3)}`],
  ['repeated', (s) => `${s} and again ${s}`],
];

/** Whatever the redacted text still decodes to: any of it holding the secret is a leak. */
function decodings(out: string): string[] {
  const views = [out, out.replace(/\r?\n/g, ''), out.replace(/\\n/g, '')];
  for (const v of [...views]) {
    for (const run of v.match(/[A-Za-z0-9+/_-]{4,}={0,2}/g) ?? []) {
      views.push(Buffer.from(run.replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8'));
      for (let k = 1; k < 4; k++)
        views.push(
          Buffer.from(run.slice(k).replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('utf8'),
        );
    }
    for (const run of v.match(/(?:[0-9a-fA-F]{2}){3,}/g) ?? [])
      views.push(Buffer.from(run, 'hex').toString('utf8'));
    try {
      views.push(decodeURIComponent(v.replace(/\+/g, ' ')));
    } catch {
      // not percent-encoded
    }
    views.push(
      v
        .replace(/\\u([0-9a-fA-F]{4})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)))
        .replace(/\\(["\\/])/g, '$1'),
    );
  }
  return views;
}

describe('redactSecrets: a secret never survives in any encoding that leaks in practice', () => {
  const cases = SECRETS.flatMap((secret) => ENCODINGS.map(([name, enc]) => [name, secret, enc] as const));

  it.each(cases)('%s of %j', (_name, secret, enc) => {
    const input = `before ${enc(secret)} after`;
    const out = redactSecrets(input, [secret]);
    expect(out).toContain(REDACTED);
    expect(out.startsWith('before')).toBe(true);
    expect(out.endsWith('after')).toBe(true);
    // the secret minus one character at each end is already too much to leave
    const core = secret.length >= 6 ? secret.slice(1, -1) : secret;
    for (const view of decodings(out)) expect(view).not.toContain(core);
  });

  it('walks objects, arrays and keys, and leaves everything else alone', () => {
    const s = 'deep-secret-42';
    const out = redactSecrets(
      { a: [1, true, null, `x${s}y`], [s]: { n: 3, b64: b64(s) }, keep: 'nothing to see' },
      [s],
    );
    expect(out).toEqual({
      a: [1, true, null, `x${REDACTED}y`],
      [REDACTED]: { n: 3, b64: REDACTED },
      keep: 'nothing to see',
    });
  });

  it('does not touch text without the secret', () => {
    const text = 'aGVsbG8gd29ybGQ= hello%20world {"a":"b"} 68656c6c6f\nline two';
    expect(redactSecrets(text, ['hunter2-pass', 'Tr0ub4dor&3'])).toBe(text);
  });

  it('redacts the start of a secret where output was cut off in the middle of it', () => {
    expect(redactSecrets('token=hunter2-pa', ['hunter2-pass'])).toBe(`token=${REDACTED}`);
    expect(redactSecrets('ends with hun', ['hunter2-pass'])).toBe('ends with hun');
  });

  it('handles several secrets at once and ignores empty ones', () => {
    expect(redactSecrets('u=alice-sec p=bob-secret-2', ['alice-sec', '', 'bob-secret-2'])).toBe(
      `u=${REDACTED} p=${REDACTED}`,
    );
    expect(redactSecrets('nothing', [])).toBe('nothing');
  });
});
