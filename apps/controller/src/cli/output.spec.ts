import { colourWanted, paint } from './output';
import { eventTone } from './render';

describe('CLI colour', () => {
  it('is on only for a terminal, and off with NO_COLOR or TERM=dumb', () => {
    expect(colourWanted({ isTTY: true }, {})).toBe(true);
    expect(colourWanted({ isTTY: false }, {})).toBe(false);
    expect(colourWanted({}, {})).toBe(false);
    expect(colourWanted({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    // no-color.org: an empty NO_COLOR does not count
    expect(colourWanted({ isTTY: true }, { NO_COLOR: '' })).toBe(true);
    expect(colourWanted({ isTTY: true }, { TERM: 'dumb' })).toBe(false);
  });

  it('paints a tone and switches it off again, or leaves the text alone', () => {
    expect(paint(true, 'red', 'x')).toBe('\x1b[31mx\x1b[39m');
    expect(paint(true, 'dim', 'x')).toBe('\x1b[2mx\x1b[22m');
    expect(paint(false, 'red', 'x')).toBe('x');
    expect(paint(true, null, 'x')).toBe('x');
  });

  it('an event line is coloured by how it ended', () => {
    expect(eventTone('■ completed')).toBe('green');
    expect(eventTone('■ failed: tool_error')).toBe('red');
    expect(eventTone('■ cancelled')).toBe('yellow');
    expect(eventTone('  ✗ step s1 failed: boom')).toBe('red');
    expect(eventTone('  ✓ shell_exec (3 ms): hi')).toBe('green');
    expect(eventTone('? permission needed: file_write {}')).toBe('cyan');
    expect(eventTone('· round 1: context 10 tokens')).toBe('dim');
    expect(eventTone('plain')).toBeNull();
  });
});
