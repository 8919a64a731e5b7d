const TYPE_RESPOND = /"type"\s*:\s*"respond"/;
const CONTENT_START = /"content"\s*:\s*"/;
const ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/**
 * Pulls the `content` string of a `respond` directive out of a streamed JSON
 * reply as it arrives, so the answer can be shown live. Emits nothing until the
 * reply is known to be a respond directive; never emits past the closing quote.
 */
export class RespondStreamExtractor {
  private text = '';
  private emitted = 0;

  feed(delta: string): string {
    this.text += delta;
    if (!TYPE_RESPOND.test(this.text)) return '';
    const start = CONTENT_START.exec(this.text);
    if (!start) return '';
    const decoded = this.decodeFrom(start.index + start[0].length);
    const out = decoded.slice(this.emitted);
    this.emitted = decoded.length;
    return out;
  }

  private decodeFrom(i: number): string {
    let out = '';
    const s = this.text;
    while (i < s.length) {
      const ch = s[i];
      if (ch === '"') return out;
      if (ch !== '\\') {
        out += ch;
        i += 1;
        continue;
      }
      if (i + 1 >= s.length) return out;
      const esc = s[i + 1];
      if (esc === 'u') {
        if (i + 6 > s.length) return out;
        out += String.fromCharCode(parseInt(s.slice(i + 2, i + 6), 16));
        i += 6;
      } else {
        out += ESCAPES[esc] ?? esc;
        i += 2;
      }
    }
    return out;
  }
}

/** Tools protocol: the reply's text is the answer itself, streamed as it comes. */
export class PlainTextStream {
  feed(delta: string): string {
    return delta;
  }
}

const isHighSurrogate = (code: number): boolean => code >= 0xd800 && code <= 0xdbff;

/**
 * `text` cut where no character is split: a trailing high surrogate (the first
 * half of an emoji written as an escaped pair, or streamed one UTF-16 unit per
 * chunk) is held back for the next piece.
 */
export function splitAtCharBoundary(text: string): { emit: string; hold: string } {
  if (text.length > 0 && isHighSurrogate(text.charCodeAt(text.length - 1)))
    return { emit: text.slice(0, -1), hold: text.slice(-1) };
  return { emit: text, hold: '' };
}

/** Stream pieces re-cut so that no OUTPUT_CHUNK ever holds half a surrogate pair. */
export class CharSafeChunks {
  private held = '';

  push(delta: string): string {
    const { emit, hold } = splitAtCharBoundary(this.held + delta);
    this.held = hold;
    return emit;
  }

  /** what is still held when the stream ends (a lone high surrogate is sent as it is) */
  flush(): string {
    const rest = this.held;
    this.held = '';
    return rest;
  }
}

/**
 * Raw reply pieces that make the extractor emit exactly `deltas` again: the
 * reply up to the start of its content string, then each delta JSON-escaped.
 * A replay streams these so its OUTPUT_CHUNK events match the recording.
 */
export function rawChunksFor(content: string, deltas: readonly string[]): string[] {
  const start = CONTENT_START.exec(content);
  if (!start || !TYPE_RESPOND.test(content.slice(0, start.index))) return [content];
  return [
    content.slice(0, start.index + start[0].length),
    ...deltas.map((d) => JSON.stringify(d).slice(1, -1)),
    '"}',
  ];
}
