import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AcceptCheck, RuntimeEvent } from '@runledger/contracts';
import { ToolSandbox } from '@runledger/tools';
import { judgeAcceptance } from './accept-gate';
import { EventLogBuilder, acceptCheck as check } from './testing-events';
import { LiveWorkspaceView, RecordedWorkspaceView, WorkspaceView } from './workspace-view';

/** The reported run: the model wrote out.txt with a shell redirect and answered. */
const shellWrote = () =>
  new EventLogBuilder()
    .received()
    .toolRound('shell_exec', { command: 'echo hi > out.txt' }, { exit_code: 0, stdout: '' })
    .responded('wrote out.txt');

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** A view that counts its looks, to show when the log settles a check on its own. */
class CountingView extends WorkspaceView {
  looks = 0;
  constructor(private readonly inner: WorkspaceView) {
    super();
  }
  observe(c: AcceptCheck) {
    this.looks++;
    return this.inner.observe(c);
  }
}

describe('accept gate: the workspace settles file checks the log does not', () => {
  let root: string;
  let outside: string;
  let sut: LiveWorkspaceView;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'rl-gate-root-'));
    outside = mkdtempSync(join(tmpdir(), 'rl-gate-out-'));
    sut = new LiveWorkspaceView(new ToolSandbox({ allowedRoot: root, mode: 'process', bwrapPath: null }));
  });
  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  it('a file a shell command wrote passes file_exists and content_contains, with what was seen recorded', () => {
    writeFileSync(join(root, 'out.txt'), 'hi\n');
    const checks = [
      check('file_exists', { target: 'out.txt' }),
      check('content_contains', { target: 'out.txt', match: 'hi' }),
    ];
    // without a view the log alone cannot tell (the reported failure)
    expect(judgeAcceptance(checks, shellWrote().events).results.map((r) => r.detail)).toEqual([
      'nothing recorded shows out.txt exists',
      'no recorded content of out.txt',
    ]);

    const decision = judgeAcceptance(checks, shellWrote().events, undefined, sut);
    expect(decision.passed).toBe(true);
    expect(decision.results).toEqual([
      expect.objectContaining({
        passed: true,
        detail: 'out.txt is in the workspace (3 bytes)',
        observed: {
          source: 'workspace',
          exists: true,
          size: 3,
          sha256: sha256('hi\n'),
          excerpt: null,
          note: null,
        },
      }),
      expect.objectContaining({
        passed: true,
        detail: 'out.txt in the workspace contains "hi"',
        observed: expect.objectContaining({ exists: true, excerpt: 'hi' }),
      }),
    ]);
  });

  it('a missing file, or content without the match, fails and says what was seen', () => {
    writeFileSync(join(root, 'out.txt'), 'hello there\n');
    const decision = judgeAcceptance(
      [
        check('file_exists', { id: 'gone', target: 'nope.txt' }),
        check('content_contains', { id: 'bye', target: 'out.txt', match: 'bye' }),
        check('content_contains', {
          id: 're',
          target: 'out.txt',
          match: 'h[a-z]+o',
          params: { regex: true },
        }),
      ],
      shellWrote().events,
      undefined,
      sut,
    );
    expect(decision.results.map((r) => [r.id, r.passed, r.observed?.exists, r.observed?.excerpt])).toEqual([
      ['gone', false, false, null],
      ['bye', false, true, null],
      ['re', true, true, 'hello'],
    ]);
    expect(decision.failing?.detail).toMatch(/^nope.txt is not in the workspace \(no such file/);
  });

  it('never looks outside the allowed root: a symlink out of it or a ../ path counts as missing', () => {
    writeFileSync(join(outside, 'secret.txt'), 'hi');
    symlinkSync(join(outside, 'secret.txt'), join(root, 'link.txt'));
    const decision = judgeAcceptance(
      [
        check('content_contains', { id: 'link', target: 'link.txt', match: 'hi' }),
        check('file_exists', { id: 'up', target: `../${outside.split('/').pop()}/secret.txt` }),
      ],
      shellWrote().events,
      undefined,
      sut,
    );
    expect(decision.results.map((r) => [r.passed, r.observed?.exists])).toEqual([
      [false, false],
      [false, false],
    ]);
    expect(decision.results[0].detail).toMatch(/outside the allowed root/);
    expect(decision.results[1].detail).toMatch(/escapes the allowed root/);
  });

  it('a symlink inside the root is followed', () => {
    mkdirSync(join(root, 'dist'));
    writeFileSync(join(root, 'dist', 'real.txt'), 'built');
    symlinkSync(join(root, 'dist', 'real.txt'), join(root, 'latest.txt'));
    const decision = judgeAcceptance(
      [check('content_contains', { target: 'latest.txt', match: 'built' })],
      shellWrote().events,
      undefined,
      sut,
    );
    expect(decision.passed).toBe(true);
  });

  it('a recorded write or read settles the check: the workspace is not looked at', () => {
    const view = new CountingView(sut);
    const log = new EventLogBuilder()
      .received()
      .toolRound('file_write', { path: 'notes.md', content: 'todo: ship' }, { bytes: 10 })
      .responded('done');
    const decision = judgeAcceptance(
      [check('content_contains', { target: 'notes.md', match: 'ship' })],
      log.events,
      undefined,
      view,
    );
    expect(decision.results[0]).toMatchObject({
      passed: true,
      detail: expect.stringContaining('written by'),
    });
    expect(decision.results[0].observed).toBeUndefined();
    expect(view.looks).toBe(0);
  });

  it('a shell command after the last recorded write unsettles it: the workspace decides', () => {
    const view = new CountingView(sut);
    const log = new EventLogBuilder()
      .received()
      .toolRound('file_write', { path: 'notes.md', content: 'todo: ship' }, { bytes: 10 })
      .toolRound('shell_exec', { command: 'rm notes.md' }, { exit_code: 0, stdout: '' })
      .responded('done');
    const decision = judgeAcceptance(
      [check('file_exists', { target: 'notes.md' })],
      log.events,
      undefined,
      view,
    );
    expect(decision.results[0]).toMatchObject({ passed: false, observed: { exists: false } });
    expect(view.looks).toBe(1);
  });

  it('a replay view hands back the recorded observation: the same verdict with the file gone', () => {
    writeFileSync(join(root, 'out.txt'), 'hi\n');
    const checks = [
      check('file_exists', { target: 'out.txt' }),
      check('content_contains', { target: 'out.txt', match: 'hi' }),
    ];
    const live = judgeAcceptance(checks, shellWrote().events, undefined, sut);
    const recorded: RuntimeEvent[] = [
      ...shellWrote().events,
      {
        ...shellWrote().events[0],
        type: 'ACCEPTANCE_DECIDED',
        payload: { passed: live.passed, results: live.results },
      } as RuntimeEvent,
    ];
    rmSync(join(root, 'out.txt'));
    expect(judgeAcceptance(checks, shellWrote().events, undefined, sut).passed).toBe(false);
    const replayed = judgeAcceptance(
      checks,
      shellWrote().events,
      undefined,
      new RecordedWorkspaceView(recorded),
    );
    expect(replayed).toEqual(live);
  });
});
