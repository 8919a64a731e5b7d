import { CharSafeChunks, RespondStreamExtractor, splitAtCharBoundary } from './respond-stream';

const EMOJI = '\u{1F600}'; // 😀, two UTF-16 units: \ud83d \ude00

describe('splitAtCharBoundary', () => {
  it.each<[string, string, string]>([
    ['', '', ''],
    ['abc', 'abc', ''],
    [`a${EMOJI}`, `a${EMOJI}`, ''],
    ['a\ud83d', 'a', '\ud83d'],
    ['\ud83d', '', '\ud83d'],
    ['\ude00b', '\ude00b', ''],
    [`${EMOJI}\ud83d`, EMOJI, '\ud83d'],
  ])('%j -> emit %j, hold %j', (text, emit, hold) => {
    expect(splitAtCharBoundary(text)).toEqual({ emit, hold });
  });
});

describe('CharSafeChunks', () => {
  const run = (pieces: string[]) => {
    const sut = new CharSafeChunks();
    const out = pieces.map((p) => sut.push(p)).filter(Boolean);
    const rest = sut.flush();
    return rest ? [...out, rest] : out;
  };

  it('an emoji streamed one UTF-16 unit per chunk comes out whole, in one chunk', () => {
    expect(run(['a', '\ud83d', '\ude00', 'b'])).toEqual(['a', EMOJI, 'b']);
  });

  it('whole characters pass through as they came', () => {
    expect(run(['ab', EMOJI, 'c'])).toEqual(['ab', EMOJI, 'c']);
  });

  it('a lone high surrogate at the very end is still delivered', () => {
    expect(run(['a\ud83d'])).toEqual(['a', '\ud83d']);
  });

  it('an escaped surrogate pair in a respond directive, streamed one character per chunk, never splits', () => {
    const raw = `{"type":"respond","content":"hi \\ud83d\\ude00!"}`;
    const extractor = new RespondStreamExtractor();
    const safe = new CharSafeChunks();
    const out = [...raw].map((ch) => safe.push(extractor.feed(ch))).filter(Boolean);
    expect(out.join('')).toBe(`hi ${EMOJI}!`);
    for (const chunk of out) expect(splitAtCharBoundary(chunk).hold).toBe('');
    expect(out).toContain(EMOJI);
  });
});
