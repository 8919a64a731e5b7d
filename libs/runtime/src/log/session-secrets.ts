import { createHmac, randomBytes } from 'node:crypto';
import { NewEvent, RuntimeEvent, SecretFingerprint } from '@runledger/contracts';
import { redactSecrets } from '@runledger/tools';

type Encoding = SecretFingerprint['forms'][number]['encoding'];

/** A secret's whole printed forms, and how to get the value back from each. */
const FORMS: Record<Encoding, { encode: (v: string) => string; decode: (t: string) => string }> = {
  plain: { encode: (v) => v, decode: (t) => t },
  base64: {
    encode: (v) => Buffer.from(v, 'utf8').toString('base64'),
    decode: (t) => Buffer.from(t, 'base64').toString('utf8'),
  },
  base64_newline: {
    encode: (v) => Buffer.from(`${v}\n`, 'utf8').toString('base64'),
    decode: (t) => Buffer.from(t, 'base64').toString('utf8').replace(/\n$/, ''),
  },
  hex: {
    encode: (v) => Buffer.from(v, 'utf8').toString('hex'),
    decode: (t) => Buffer.from(t, 'hex').toString('utf8'),
  },
};

/** Where a token ends in printed output besides whitespace: quotes, assignments, separators, brackets. */
const DELIMITERS = /[\s"'`=:;,()[\]{}<>|&]+/;

/** Every line, whitespace-separated word and delimiter-separated word of `text` whose length is wanted. */
function candidates(text: string, lengths: ReadonlySet<number>): Set<string> {
  const out = new Set<string>();
  const add = (t: string) => {
    if (lengths.has(t.length)) out.add(t);
  };
  for (const line of text.split(/\r?\n/)) {
    add(line);
    add(line.trim());
    for (const word of line.split(/\s+/)) add(word);
    for (const word of line.split(DELIMITERS)) add(word);
  }
  return out;
}

function strings(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) strings(v, out);
  else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) {
      out.push(k);
      strings(v, out);
    }
  return out;
}

/**
 * The secrets provided in each session, so that no later output of the
 * session stores them: not the task's next step printing a file a command
 * wrote the secret to, not another task of the session, not a memory write.
 *
 * While the process lives the values are held in memory per session and every
 * event appended for the session is redacted of them in every encoding the
 * redactor covers. The log keeps only a keyed fingerprint (SECRET_PROVIDED):
 * after a restart the values are gone, and output is searched for lines and
 * words as long as a recorded form (as is, base64, hex) whose keyed hash
 * matches; a match gives the value back, which is then held and redacted in
 * every encoding as before.
 *
 * Trade-off: hashing every substring of every output would cost one HMAC per
 * byte per length; hashing whole lines and words is cheap (one HMAC per token
 * of a recorded length) but, until the value is recovered, misses a secret
 * glued to other characters or printed in a partial encoding. Recording the
 * forms' lengths tells a reader of the log how long the secret is. Without the
 * key (beside the database, mode 0600) a fingerprint cannot be tested against
 * guesses.
 */
export class SessionSecrets {
  private readonly values = new Map<string, Set<string>>();
  /** recorded fingerprints whose value this process does not hold: digest -> form, per session */
  private readonly unknown = new Map<string, Map<string, { encoding: Encoding; fp: SecretFingerprint }>>();
  private loaded: Promise<void> | null = null;

  /** `key`: the fingerprint key, kept beside the database; a random one fits a log that dies with the process */
  constructor(private readonly key: Buffer = randomBytes(32)) {}

  private hmac(text: string): string {
    return createHmac('sha256', this.key).update(text, 'utf8').digest('hex');
  }

  /** The keyed fingerprint SECRET_PROVIDED records, without holding the value. */
  fingerprintOf(value: string): SecretFingerprint {
    return {
      alg: 'hmac-sha256',
      forms: (Object.keys(FORMS) as Encoding[]).map((encoding) => {
        const text = FORMS[encoding].encode(value);
        return { encoding, length: text.length, digest: this.hmac(text) };
      }),
    };
  }

  /** Hold a value provided for the session; what the log records instead of it. */
  remember(sessionId: string, value: string): SecretFingerprint {
    this.hold(sessionId, value);
    return this.fingerprintOf(value);
  }

  private hold(sessionId: string, value: string): void {
    if (value.length === 0) return;
    if (!this.values.has(sessionId)) this.values.set(sessionId, new Set());
    this.values.get(sessionId)!.add(value);
    // a held value needs no search: drop the forms of its fingerprint
    const pending = this.unknown.get(sessionId);
    if (!pending) return;
    const plain = this.hmac(value);
    for (const [digest, form] of pending)
      if (form.fp.forms.some((f) => f.encoding === 'plain' && f.digest === plain)) pending.delete(digest);
  }

  /** Learn the fingerprints the log holds (once per process), to recognise secrets provided before a restart. */
  load(readProvided: () => Promise<RuntimeEvent[]>): Promise<void> {
    this.loaded ??= readProvided().then(
      (events) => {
        for (const e of events) this.learn(e);
      },
      (err: unknown) => {
        this.loaded = null;
        throw err;
      },
    );
    return this.loaded;
  }

  private learn(e: NewEvent | RuntimeEvent): void {
    if (e.type !== 'SECRET_PROVIDED' || !e.payload.fingerprint || !e.session_id) return;
    const fp = e.payload.fingerprint;
    const plain = fp.forms.find((f) => f.encoding === 'plain')?.digest;
    if ([...(this.values.get(e.session_id) ?? [])].some((v) => this.hmac(v) === plain)) return;
    if (!this.unknown.has(e.session_id)) this.unknown.set(e.session_id, new Map());
    for (const f of fp.forms) this.unknown.get(e.session_id)!.set(f.digest, { encoding: f.encoding, fp });
  }

  /** Recover values of the session's unknown fingerprints that `value` prints whole. */
  private recover(sessionId: string, value: unknown): void {
    const pending = this.unknown.get(sessionId);
    if (!pending || pending.size === 0) return;
    const lengths = new Set<number>();
    for (const form of pending.values()) for (const f of form.fp.forms) lengths.add(f.length);
    for (const text of strings(value))
      for (const token of candidates(text, lengths)) {
        const form = pending.get(this.hmac(token));
        if (form) this.hold(sessionId, FORMS[form.encoding].decode(token));
      }
  }

  /**
   * The secrets of the events' sessions this instance holds, or recovers from the events themselves
   * (any SECRET_PROVIDED among them learnt first): what must not leave with a copy of them.
   */
  secretsIn(events: readonly RuntimeEvent[]): string[] {
    for (const e of events) this.learn(e);
    for (const e of events)
      if (e.session_id && e.type !== 'SECRET_PROVIDED') this.recover(e.session_id, e.payload);
    const sessions = new Set(events.map((e) => e.session_id));
    return [...sessions].flatMap((id) => [...(this.values.get(id) ?? [])]);
  }

  /** The events with every secret of their session redacted; SECRET_PROVIDED fingerprints are learnt. */
  redactEvents(events: readonly NewEvent[]): NewEvent[] {
    return events.map((e) => {
      if (!e.session_id) return e;
      if (e.type === 'SECRET_PROVIDED') {
        this.learn(e);
        return e;
      }
      this.recover(e.session_id, e.payload);
      const held = this.values.get(e.session_id);
      if (!held || held.size === 0) return e;
      return { ...e, payload: redactSecrets(e.payload, [...held]) } as NewEvent;
    });
  }
}
