import {
  fingerprintRound,
  isReadOnlyCall,
  repeatFold,
  repeatStep,
  initialRepeatState,
  RepeatVerdict,
} from './repeat-detector';
import { roundsOf } from './round-facts';
import { EventLogBuilder } from './testing-events';

type Step = [tool: string, args: Record<string, unknown>, output: unknown, ok?: boolean];

/** Actions of the detector, round by round, for a run of tool rounds. */
function actions(steps: Step[], threshold = 2): string[] {
  const log = new EventLogBuilder().received();
  steps.forEach(([tool, args, output, ok]) => log.toolRound(tool, args, output, ok ?? true));
  let state = initialRepeatState();
  return roundsOf(log.events).map((r) => {
    const v: RepeatVerdict = repeatStep(state, fingerprintRound(r), threshold);
    state = v.state;
    return v.action;
  });
}

const write = (content: string): Step => [
  'file_write',
  { path: 'a.txt', content },
  { bytes: content.length },
];
const shell = (command: string, stdout = ''): Step => ['shell_exec', { command }, { exit_code: 0, stdout }];
const read = (path: string): Step => ['file_read', { path }, { content: 'same' }];

describe('repeat-cycle detector', () => {
  it.each<[string, Step[], string[]]>([
    [
      'the same write with the same result 4 times: remind at the 2nd repeat, stop at the next',
      [write('x'), write('x'), write('x'), write('x')],
      ['continue', 'continue', 'remind', 'stop'],
    ],
    [
      'the same failing command over and over',
      [
        shell('make deploy', 'err'),
        shell('make deploy', 'err'),
        shell('make deploy', 'err'),
        shell('make deploy', 'err'),
      ],
      ['continue', 'continue', 'remind', 'stop'],
    ],
    [
      'an A/B/A/B loop: both halves repeat',
      [write('a'), write('b'), write('a'), write('b'), write('a')],
      ['continue', 'continue', 'continue', 'remind', 'stop'],
    ],
    [
      'reading rounds in between neither count nor break the streak',
      [write('x'), read('a.txt'), write('x'), read('a.txt'), write('x'), read('a.txt'), write('x')],
      ['continue', 'continue', 'continue', 'continue', 'remind', 'continue', 'stop'],
    ],
    [
      'legit: 8 different successful tool calls',
      [
        write('1'),
        write('2'),
        shell('npm install'),
        shell('npm run build'),
        read('a.txt'),
        write('3'),
        shell('git add .'),
        shell('git commit -m x'),
      ],
      Array<string>(8).fill('continue'),
    ],
    [
      'legit: reading and testing the same thing again and again',
      [
        read('a.txt'),
        read('a.txt'),
        shell('npm test', 'fail'),
        shell('npm test', 'fail'),
        shell('npm test', 'fail'),
        ['memory_search', { query: 'x' }, []],
        ['memory_search', { query: 'x' }, []],
      ],
      Array<string>(7).fill('continue'),
    ],
    [
      'legit: a fix loop (test, different write, test) is not a cycle',
      [
        shell('npm test', 'f1'),
        write('v1'),
        shell('npm test', 'f2'),
        write('v2'),
        shell('npm test', 'ok'),
        write('v3'),
      ],
      Array<string>(6).fill('continue'),
    ],
    [
      'a repeat after the reminder was broken by a new round starts over',
      [write('x'), write('x'), write('x'), write('y'), write('x')],
      ['continue', 'continue', 'remind', 'continue', 'continue'],
    ],
    [
      'same write, different result (e.g. disk full then ok): not a repeat',
      [write('x'), ['file_write', { path: 'a.txt', content: 'x' }, null, false], write('x')],
      ['continue', 'continue', 'continue'],
    ],
  ])('%s', (_n, steps, expected) => {
    expect(actions(steps)).toEqual(expected);
  });

  it('replays from the log to the same verdict after a restart', () => {
    const log = new EventLogBuilder().received();
    [write('x'), write('x'), write('x')].forEach(([t, a, o]) => log.toolRound(t, a, o));
    expect(repeatFold(roundsOf(log.events), 2)).toMatchObject({
      action: 'remind',
      state: { streak: 2, reminded: true },
    });
  });

  it.each([
    [{ tool: 'file_read', args: { path: 'x' } }, true],
    [{ tool: 'memory_list', args: {} }, true],
    [{ tool: 'shell_exec', args: { command: 'npx jest src' } }, true],
    [{ tool: 'shell_exec', args: { command: 'git status' } }, true],
    [{ tool: 'shell_exec', args: { command: 'cat a > b' } }, false],
    [{ tool: 'shell_exec', args: { command: 'rm -rf dist' } }, false],
    [{ tool: 'file_write', args: { path: 'x' } }, false],
  ])('read-only classification %j -> %s', (call, readOnly) => {
    expect(isReadOnlyCall(call)).toBe(readOnly);
  });
});
