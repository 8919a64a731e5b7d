import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventPayload, NewEvent, RuntimeEvent } from '@runledger/contracts';
import { SqliteStorage, createSqliteStorage, foldTaskState } from '@runledger/state-store';
import { ModelScript, ScriptedBackend } from '../model/scripted-backend';
import { PermissionService } from '@runledger/permissions';
import { storesProgress } from './checkpoints';
import { foldProgress } from './progress';
import { progressFromSnapshot } from './progress-snapshot';
import { LogTaskViews, taskViewFromEvents } from './task-views';
import { AllowAllPolicy, RuleTablePolicy, TestRuntime, startTestRuntime, testToolRegistry } from '../testing';

const json = (v: unknown): string => JSON.stringify(v);
const PLAN = {
  type: 'plan',
  steps: [
    { id: 'a', kind: 'tool', tool: 'echo', args: { text: 'one' } },
    { id: 'b', kind: 'tool', tool: 'echo', args: { text: 'two' }, depends_on: ['a'] },
  ],
};
const SCRIPT: ModelScript = {
  orchestrator: [
    json(PLAN),
    '{"type":"tool","tool":"echo","args":{"text":"three"}}',
    '{"type":"respond","content":"done"}',
  ],
};

type Saved = RuntimeEvent & { type: 'CHECKPOINT_SAVED'; payload: EventPayload<'CHECKPOINT_SAVED'> };
const checkpointsOf = (events: readonly RuntimeEvent[]) =>
  events.filter((e): e is Saved => e.type === 'CHECKPOINT_SAVED');

describe('checkpoints of a running task (SQLite)', () => {
  let dir: string;
  let storage: SqliteStorage;
  const runtimes: TestRuntime[] = [];
  /** every append the runtime made, as batches of event types */
  let batches: string[][];
  /** events handed out by the store's reads since the last reset */
  let eventsRead: number;

  const start = async (
    script: ModelScript,
    permissions: PermissionService = new AllowAllPolicy(),
    everyEvents: number | null = 50,
  ) => {
    const rt = await startTestRuntime({
      store: storage.eventStore,
      tools: testToolRegistry(dir),
      permissions,
      model: new ScriptedBackend(script),
      checkpoints: everyEvents === null ? null : { store: storage.checkpoints, everyEvents },
    });
    runtimes.push(rt);
    return rt;
  };
  const run = async (rt: TestRuntime, input: string) => {
    const { task_id } = await rt.runtime.submit({ input }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    return { task_id, progress, events: await storage.eventStore.readWholeStream(task_id) };
  };
  const rows = () =>
    storage.raw
      .prepare('SELECT checkpoint_id, event_sequence, label FROM checkpoints ORDER BY event_sequence')
      .all();

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-checkpoints-'));
    storage = await createSqliteStorage({ path: join(dir, 'runledger.db'), synchronous: 'NORMAL' });
    batches = [];
    eventsRead = 0;
    const append = storage.eventStore.append.bind(storage.eventStore);
    jest.spyOn(storage.eventStore, 'append').mockImplementation(async (taskId, events, options) => {
      batches.push(events.map((e) => e.type));
      return append(taskId, events, options);
    });
    const readStream = storage.eventStore.readStream.bind(storage.eventStore);
    jest.spyOn(storage.eventStore, 'readStream').mockImplementation(async (taskId, options) => {
      const page = await readStream(taskId, options);
      eventsRead += page.length;
      return page;
    });
  });
  afterEach(async () => {
    for (const rt of runtimes.splice(0)) await rt.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a task that ended here settles with its writer's fold, loading nothing: equal to the progress loaded from the log", async () => {
    const rt = await start(SCRIPT);
    const latest = jest.spyOn(storage.checkpoints, 'latest');
    const { task_id, progress } = await run(rt, 'plan, then a tool');
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    expect(latest).not.toHaveBeenCalled();
    expect(progress).toEqual(await rt.runtime.progress(task_id));
    expect(latest).toHaveBeenCalledTimes(1);
  });

  it('saves one after each plan step and round, in the same append as the event that ends it, with a true snapshot row', async () => {
    const { events, progress } = await run(await start(SCRIPT), 'plan, then a tool');
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'done' });
    const saved = checkpointsOf(events);
    // round 1's end would commit with step b's checkpoint (both ride with the next model call): only one of a
    // commit's checkpoints can ever be resumed from
    expect(saved.map((e) => [events[e.sequence - 2].type, e.payload.label])).toEqual([
      ['STEP_COMPLETED', 'step a'],
      ['STEP_COMPLETED', 'step b'],
      ['TOOL_COMPLETED', 'round 2'],
    ]);
    for (const e of saved) expect(e.payload.at_sequence).toBe(e.sequence - 1);
    // no commit of its own: every CHECKPOINT_SAVED rode with the event that called for it, right after it
    const inBatches = batches.flatMap((b) =>
      b.flatMap((type, i) => (type === 'CHECKPOINT_SAVED' ? [b[i - 1] ?? null] : [])),
    );
    expect(inBatches).toEqual(saved.map((e) => events[e.sequence - 2].type));
    expect(rows()).toEqual(
      saved.map((e) => ({
        checkpoint_id: e.payload.checkpoint_id,
        event_sequence: e.sequence,
        label: e.payload.label,
      })),
    );
    let lastWithProgress = 0;
    for (const e of saved) {
      const upTo = events.slice(0, e.sequence);
      const checkpoint = await storage.checkpoints.latest(e.task_id, e.sequence);
      expect(checkpoint!.state).toEqual(foldTaskState(upTo));
      if (storesProgress(e.payload.label, e.sequence, lastWithProgress)) {
        expect(progressFromSnapshot(checkpoint!.context)).toEqual(foldProgress(e.task_id, upTo));
        lastWithProgress = e.sequence;
      } else expect(checkpoint!.context).toBeNull();
    }
    // the first checkpoint always holds the progress, and not every one does
    expect(storesProgress(saved[0].payload.label, saved[0].sequence, 0)).toBe(true);
    const held = storage.raw
      .prepare(`SELECT count(*) FROM checkpoints WHERE context != 'null'`)
      .pluck()
      .get();
    expect(held).toBeLessThan(saved.length);
  });

  it('a long task stores its progress at doubling sequences only; progress loads from the newest that holds it', async () => {
    // tool rounds, then the answer: the default cap of 10 rounds
    const rounds = 9;
    const script: ModelScript = {
      orchestrator: [
        ...Array.from({ length: rounds }, (_, i) =>
          json({ type: 'tool', tool: 'echo', args: { text: `round ${i + 1}` } }),
        ),
        '{"type":"respond","content":"done"}',
      ],
    };
    const rt = await start(script);
    const { task_id, events, progress } = await run(rt, 'many rounds');
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    const withProgress = storage.raw
      .prepare(`SELECT event_sequence FROM checkpoints WHERE context != 'null' ORDER BY event_sequence`)
      .pluck()
      .all() as number[];
    expect(checkpointsOf(events).length).toBeGreaterThanOrEqual(rounds);
    // each one at least twice the sequence of the one before: a handful, not one per round
    for (let i = 1; i < withProgress.length; i++)
      expect(withProgress[i]).toBeGreaterThanOrEqual(2 * withProgress[i - 1]);
    expect(withProgress.length).toBeLessThanOrEqual(Math.ceil(Math.log2(events.length)) + 1);

    eventsRead = 0;
    expect(await rt.runtime.progress(task_id)).toEqual(foldProgress(task_id, events));
    expect(eventsRead).toBe(events.length - withProgress[withProgress.length - 1]);
  });

  it('saves one when the task starts waiting for a person, and every N events in between', async () => {
    const { events, progress } = await run(
      await start(SCRIPT, new RuleTablePolicy({ echo: 'prompt' }), 3),
      'guarded',
    );
    expect(progress.status).toBe('awaiting_permission');
    const last = events[events.length - 1];
    expect(last).toMatchObject({ type: 'CHECKPOINT_SAVED', payload: { label: 'awaiting permission' } });
    expect(events[events.length - 2].type).toBe('TASK_AWAITING_PERMISSION');
    const counted = checkpointsOf(events).filter((e) => e.payload.label === '3 events');
    expect(counted.length).toBeGreaterThan(0);
    // never more than N events (plus the rest of the batch that reached N) without a checkpoint
    const sequences = [0, ...checkpointsOf(events).map((e) => e.sequence)];
    const longestBatch = Math.max(...batches.map((b) => b.length));
    for (let i = 1; i < sequences.length; i++)
      expect(sequences[i] - sequences[i - 1] - 1).toBeLessThanOrEqual(3 + longestBatch - 1);
  });

  it('with checkpoints off, a run writes no CHECKPOINT_SAVED and no row', async () => {
    const { events, progress } = await run(await start(SCRIPT, new AllowAllPolicy(), null), 'no checkpoints');
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    expect(checkpointsOf(events)).toEqual([]);
    expect(rows()).toEqual([]);
  });

  it('after a restart, progress and resume load the latest checkpoint + the events after it, equal to a full fold', async () => {
    const first = await start(SCRIPT, new RuleTablePolicy({ echo: 'prompt' }));
    const { task_id, progress: waiting } = await run(first, 'guarded');
    expect(waiting.status).toBe('awaiting_permission');
    // the answer was logged, then the process died before the task went on
    const request = waiting.pendingPermission!;
    await storage.eventStore.append(
      task_id,
      [
        {
          type: 'PERMISSION_RESOLVED',
          session_id: waiting.session_id,
          payload: {
            request_id: request.request_id,
            call_id: request.call_id,
            decision: 'allow_always',
            args_hash: request.args_hash,
            tool: request.tool,
          },
        } as NewEvent,
      ],
      { expected: waiting.last_seq },
    );
    await first.close();
    const whole = await storage.eventStore.readWholeStream(task_id);

    const restarted = await start(SCRIPT, new RuleTablePolicy({ echo: 'prompt' }));
    eventsRead = 0;
    const loaded = await restarted.runtime.progress(task_id);
    expect(loaded).toEqual(foldProgress(task_id, whole));
    // the one event after the checkpoint, of the whole log's ten
    expect(eventsRead).toBe(1);
    expect(whole).toHaveLength(10);

    expect(await restarted.runtime.resumeUnfinished()).toEqual([task_id]);
    const after = await restarted.runtime.settled(task_id);
    expect(after.final).toMatchObject({ stop_reason: 'completed', result: 'done' });
    expect(after).toEqual(foldProgress(task_id, await storage.eventStore.readWholeStream(task_id)));
  });

  it('a snapshot of an unknown version is ignored: progress folds the whole log', async () => {
    const rt = await start(SCRIPT, new RuleTablePolicy({ echo: 'prompt' }));
    const { task_id } = await run(rt, 'guarded');
    storage.raw
      .prepare(`UPDATE checkpoints SET context = json_set(context, '$."$schema_version"', 99)`)
      .run();
    const whole = await storage.eventStore.readWholeStream(task_id);
    eventsRead = 0;
    expect(await rt.runtime.progress(task_id)).toEqual(foldProgress(task_id, whole));
    expect(eventsRead).toBe(whole.length);
  });

  it('task views over the log read the latest snapshot + the events after it', async () => {
    const rt = await start(SCRIPT, new RuleTablePolicy({ echo: 'prompt' }));
    const { task_id } = await run(rt, 'guarded');
    const whole = await storage.eventStore.readWholeStream(task_id);
    const sut = new LogTaskViews(storage.eventStore, storage.checkpoints);
    eventsRead = 0;
    expect(await sut.get(task_id)).toEqual(taskViewFromEvents(whole));
    // the task's last event is its checkpoint: nothing after it to read
    expect(eventsRead).toBe(0);
    expect(await sut.get('task_missing')).toBeNull();
  });
});
