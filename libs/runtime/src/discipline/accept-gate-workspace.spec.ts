import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { AcceptCheck } from '@runledger/contracts';
import { ToolSandbox } from '@runledger/tools';
import { RecordingRuntimeLogger, startTestRuntime } from '../testing';
import { useTempStore } from '../testing/temp-store';
import { DEFAULT_DISCIPLINE_SETTINGS } from './settings';
import { LiveWorkspaceView } from './workspace-view';
import { ScriptedBackend } from '../model/scripted-backend';
import { replayTask } from '../runtime.module';
import { replayView } from '../replay/replay-view';
import { AllowAllPolicy, testToolRegistry } from '../testing';

const checks: AcceptCheck[] = [
  { id: 'exists', kind: 'file_exists', target: 'out.txt', match: null, required: true, params: {} },
  { id: 'says_hi', kind: 'content_contains', target: 'out.txt', match: 'hi', required: true, params: {} },
];

describe('accept gate in the runtime: a file a shell command wrote', () => {
  const temp = useTempStore('rl-gate-rt-');

  /** The reported run: `echo hi > out.txt`, then an answer. */
  async function run() {
    const rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({
        orchestrator: [
          '{"type":"tool","tool":"shell_exec","args":{"command":"echo hi > out.txt"}}',
          '{"type":"respond","content":"wrote out.txt"}',
        ],
      }),
      discipline: DEFAULT_DISCIPLINE_SETTINGS,
      workspace: new LiveWorkspaceView(
        new ToolSandbox({ allowedRoot: temp.dir, mode: 'process', bwrapPath: null }),
      ),
    });
    const { task_id } = await rt.runtime.submit(
      { input: 'write hi to out.txt', accept_checks: checks },
      { source: 'cli' },
    );
    const progress = await rt.runtime.settled(task_id);
    await rt.close();
    return { task_id, progress, events: await temp.store.readWholeStream(task_id) };
  }

  it('passes file_exists and content_contains from the workspace and records what it saw', async () => {
    const { progress, events } = await run();
    expect(existsSync(join(temp.dir, 'out.txt'))).toBe(true);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'wrote out.txt' });
    const decided = events.find((e) => e.type === 'ACCEPTANCE_DECIDED');
    expect(decided?.payload).toEqual({
      passed: true,
      results: [
        expect.objectContaining({
          id: 'exists',
          passed: true,
          observed: expect.objectContaining({ source: 'workspace', exists: true, size: 3 }),
        }),
        expect.objectContaining({
          id: 'says_hi',
          passed: true,
          observed: expect.objectContaining({ exists: true, excerpt: 'hi' }),
        }),
      ],
    });
  });

  it('a replay after the file was deleted reuses the recorded verdict and matches the run', async () => {
    const { task_id } = await run();
    rmSync(join(temp.dir, 'out.txt'));
    const replay = await replayTask(
      {
        store: temp.store,
        tools: testToolRegistry(temp.dir),
        discipline: DEFAULT_DISCIPLINE_SETTINGS,
        // what the live composition would hand over: the replay must not use it
        workspace: new LiveWorkspaceView(
          new ToolSandbox({ allowedRoot: temp.dir, mode: 'process', bwrapPath: null }),
        ),
        logger: new RecordingRuntimeLogger(),
      },
      task_id,
    );
    expect(replay.progress.final).toMatchObject({ stop_reason: 'completed' });
    const original = await temp.store.readWholeStream(task_id);
    const replayed = replay.events;
    expect(replayView(replayed)).toEqual(replayView(original));
    expect(replayed.find((e) => e.type === 'ACCEPTANCE_DECIDED')?.payload).toMatchObject({ passed: true });
  });
});
