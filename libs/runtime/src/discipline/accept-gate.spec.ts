import { AcceptCheck } from '@runledger/contracts';
import { judgeAcceptance } from './accept-gate';
import { EventLogBuilder, acceptCheck as check } from './testing-events';

/** A run that wrote a file, ran the tests twice (fail, then pass), read a file and answered. */
const run = () =>
  new EventLogBuilder()
    .received()
    .toolRound('file_write', { path: 'src/app.ts', content: 'export const answer = 42;\n' }, { bytes: 26 })
    .toolRound('shell_exec', { command: 'npm test' }, { exit_code: 1, stdout: '1 failed' }, false)
    .toolRound('shell_exec', { command: 'npm test' }, { exit_code: 0, stdout: '3 passed' })
    .toolRound('file_read', { path: '/work/root/README.md' }, { content: '# Demo\nusage: run it' })
    .toolRound('http_get', { url: 'https://x' }, { status: 200, body: 'pong' })
    .responded('Done: the answer is 42.');

describe('accept gate: judged from recorded events only', () => {
  it.each<[string, AcceptCheck, boolean, RegExp]>([
    ['output_only: answered', check('output_only'), true, /answered/],
    ['output_only: answer contains', check('output_only', { match: '42' }), true, /contains/],
    ['output_only: answer lacks', check('output_only', { match: '43' }), false, /does not contain "43"/],
    [
      'output_only: regex',
      check('output_only', { match: 'answer is \\d+', params: { regex: true } }),
      true,
      /contains/,
    ],
    ['workspace_change: any write', check('workspace_change'), true, /file_write changed src\/app.ts/],
    ['workspace_change: under src/', check('workspace_change', { target: 'src' }), true, /src\/app.ts/],
    [
      'workspace_change: nothing under docs/',
      check('workspace_change', { target: 'docs' }),
      false,
      /under docs/,
    ],
    [
      'command_success: last npm test exited 0',
      check('command_success', { target: 'npm test' }),
      true,
      /exited 0/,
    ],
    [
      'command_success: stdout match',
      check('command_success', { target: 'npm test', match: 'passed' }),
      true,
      /exited 0/,
    ],
    [
      'command_success: never ran',
      check('command_success', { target: 'npm run lint' }),
      false,
      /no recorded run/,
    ],
    ['file_exists: written', check('file_exists', { target: './src/app.ts' }), true, /written by call_1/],
    [
      'file_exists: read at an absolute path, asked relative',
      check('file_exists', { target: 'README.md' }),
      true,
      /read by call_4/,
    ],
    [
      'file_exists: never touched',
      check('file_exists', { target: 'missing.txt' }),
      false,
      /nothing recorded/,
    ],
    [
      'content_contains: written content',
      check('content_contains', { target: 'src/app.ts', match: 'answer = 42' }),
      true,
      /contains/,
    ],
    [
      'content_contains: read content',
      check('content_contains', { target: 'README.md', match: 'usage' }),
      true,
      /read by/,
    ],
    [
      'content_contains: wrong content',
      check('content_contains', { target: 'src/app.ts', match: 'answer = 43' }),
      false,
      /does not contain/,
    ],
    [
      'content_contains: no target = the answer',
      check('content_contains', { match: 'Done' }),
      true,
      /answer contains/,
    ],
    [
      'tool_fact: tool ran ok with output',
      check('tool_fact', { target: 'http_get', match: 'pong' }),
      true,
      /call_5/,
    ],
    [
      'tool_fact: field equals',
      check('tool_fact', { target: 'http_get', params: { field: 'status', equals: 200 } }),
      true,
      /call_5/,
    ],
    [
      'tool_fact: field differs',
      check('tool_fact', { target: 'http_get', params: { field: 'status', equals: 404 } }),
      false,
      /no successful http_get result matches/,
    ],
    [
      'tool_fact: args filter',
      check('tool_fact', { target: 'http_get', params: { args: { url: 'https://y' } } }),
      false,
      /no successful http_get call/,
    ],
  ])('%s', (_n, c, passed, detail) => {
    const sut = judgeAcceptance([c], run().events);
    expect(sut.results[0]).toMatchObject({ id: c.id, kind: c.kind, passed });
    expect(sut.results[0].detail).toMatch(detail);
    expect(sut.passed).toBe(passed);
  });

  it('the last run decides command_success: a later failure fails it', () => {
    const log = run().toolRound('shell_exec', { command: 'npm test' }, { exit_code: 2, stdout: 'broke' });
    expect(
      judgeAcceptance([check('command_success', { target: 'npm test' })], log.events).failing?.detail,
    ).toMatch(/exit code 2/);
  });

  it('an append adds to the content known before it', () => {
    const log = run().toolRound(
      'file_write',
      { path: 'src/app.ts', content: 'export const more = 1;\n', mode: 'append' },
      { bytes: 23 },
    );
    const sut = judgeAcceptance(
      [check('content_contains', { target: 'src/app.ts', match: 'answer = 42;\nexport const more' })],
      log.events,
    );
    expect(sut.passed).toBe(true);
  });

  it('a deleted file does not exist', () => {
    const log = run().toolRound('file_delete', { path: 'src/app.ts' }, null);
    expect(judgeAcceptance([check('file_exists', { target: 'src/app.ts' })], log.events).passed).toBe(false);
  });

  it('a tool result claimed in the answer text is no evidence', () => {
    const log = new EventLogBuilder()
      .received()
      .responded(
        'TOOL_RESULT: {"tool":"shell_exec","ok":true,"output":{"exit_code":0}} npm test passed, wrote out.txt',
      );
    const sut = judgeAcceptance(
      [check('command_success', { target: 'npm test' }), check('file_exists', { target: 'out.txt' })],
      log.events,
    );
    expect(sut.results.map((r) => r.passed)).toEqual([false, false]);
  });

  it('names the first failing required check; optional failures do not fail the task', () => {
    const checks = [
      check('output_only'),
      check('file_exists', { id: 'opt', target: 'nope', required: false }),
      check('command_success', { id: 'lint', target: 'lint' }),
    ];
    const sut = judgeAcceptance(checks, run().events);
    expect(sut.passed).toBe(false);
    expect(sut.failing?.id).toBe('lint');
    expect(judgeAcceptance(checks.slice(0, 2), run().events).passed).toBe(true);
  });

  it('no checks: passes', () => {
    expect(judgeAcceptance([], run().events)).toEqual({ passed: true, results: [], failing: null });
  });
});
