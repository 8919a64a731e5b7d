import { RuntimeEvent } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { replayDivergence } from './replay-view';
import { replayTask } from '../runtime.module';
import {
  AllowAllPolicy,
  TaskRoutedBackend,
  TestRuntime,
  startTestRuntime,
  testToolRegistry,
} from '../testing';
import { useTempStore } from '../testing/temp-store';

const respond = (content: string) => JSON.stringify({ type: 'respond', content });
const waitForGo = JSON.stringify({ type: 'wait_for_signal', name: 'go' });
const echo = (text: string) => JSON.stringify({ type: 'tool', tool: 'echo', args: { text } });

/**
 * Messages that arrive together, replayed: a task queued behind another of its session, one
 * interrupted while it ran or while it waited, and one rolled back, each replay event for event
 * what the recording holds, from the log alone (the session is gone by the time it replays).
 */
describe('replay of tasks shaped by their session (queued, interrupted, rolled back)', () => {
  const temp = useTempStore('rl-replay-turns-');
  let store: InMemoryEventStore;
  let rt: TestRuntime;
  afterEach(() => rt?.close());

  /** `reply(task, round)`: the orchestrator's answer in the task's round (1, 2, ...) */
  async function start(reply: (task: string, round: number) => Promise<string> | string) {
    store = new InMemoryEventStore();
    const rounds = new Map<string, number>();
    rt = await startTestRuntime({
      store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model: new TaskRoutedBackend((task) => {
        rounds.set(task, (rounds.get(task) ?? 0) + 1);
        return reply(task, rounds.get(task)!);
      }),
    });
  }

  async function until(taskId: string, holds: (events: RuntimeEvent[]) => boolean): Promise<RuntimeEvent[]> {
    for (const deadline = Date.now() + 5_000; ;) {
      const events = await store.readWholeStream(taskId);
      if (holds(events)) return events;
      if (Date.now() > deadline)
        throw new Error(`task ${taskId} never got there: ${events.map((e) => e.type).join(', ')}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
  const ended = (events: RuntimeEvent[]) =>
    ['TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED'].includes(events[events.length - 1]?.type);

  async function expectReplaysExactly(taskId: string): Promise<RuntimeEvent[]> {
    const recorded = await store.readWholeStream(taskId);
    const replay = await replayTask({ store, tools: testToolRegistry(temp.dir), logger: rt.logger }, taskId);
    expect(replayDivergence(recorded, replay.events)).toBeNull();
    expect(replay.progress.final?.stop_reason).toBe(
      (recorded[recorded.length - 1].payload as { stop_reason?: string }).stop_reason,
    );
    return recorded;
  }

  it('a task queued behind another (enqueue) replays its queueing and its turn', async () => {
    await start((task, round) =>
      task === 'first' && round === 1 ? waitForGo : respond(`answer to ${task}`),
    );
    const submit = (input: string) =>
      rt.runtime.submit({ input, session_id: 'sess_q' }, { source: 'api' }).then((r) => r.task_id);
    const first = await submit('first');
    await until(first, (ev) => ev.some((e) => e.type === 'SIGNAL_AWAITED'));
    const second = await submit('second');
    await rt.runtime.sendSignal(first, { name: 'go', payload: {} });
    await until(second, ended);

    const recorded = await expectReplaysExactly(second);
    expect(recorded[0].payload).toMatchObject({ queued_behind: first, on_busy: 'enqueue' });
    expect(recorded[1]).toMatchObject({ type: 'SESSION_TURN_BEGAN' });
    await expectReplaysExactly(first);
  });

  it('a task interrupted while it ran, and the one that interrupted it, replay as recorded', async () => {
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    let asked!: () => void;
    const isAsked = new Promise<void>((resolve) => (asked = resolve));
    await start(async (task, round) => {
      if (task !== 'long job') return respond(`answer to ${task}`);
      if (round > 1) return respond('never reached');
      asked();
      await answered;
      return echo('working');
    });
    const long = (await rt.runtime.submit({ input: 'long job', session_id: 'sess_i' }, { source: 'api' }))
      .task_id;
    await isAsked;
    const { task_id: redo } = await rt.runtime.submit(
      { input: 'do this instead', session_id: 'sess_i', on_busy: 'interrupt' },
      { source: 'api' },
    );
    await until(long, (ev) => ev.some((e) => e.type === 'INTERRUPT_REQUESTED'));
    answer();
    await until(redo, ended);

    const recorded = await expectReplaysExactly(long);
    const types = recorded.map((e) => e.type);
    // the interrupt came while the model was asked: the round ran to its end, no second round began
    expect(types.indexOf('INTERRUPT_REQUESTED')).toBeLessThan(types.indexOf('MODEL_RESPONDED'));
    expect(types).toContain('TOOL_COMPLETED');
    expect(recorded[recorded.length - 1].payload).toMatchObject({ stop_reason: 'interrupted' });
    await expectReplaysExactly(redo);
  });

  it('a task rolled back while its model was asked, and the message that rolled it back, replay as recorded', async () => {
    let asked!: () => void;
    const isAsked = new Promise<void>((resolve) => (asked = resolve));
    await start(async (task) => {
      if (task !== 'long job') return respond(`answer to ${task}`);
      asked();
      // answers only once the rollback cancelled the task (its call is aborted then)
      await new Promise((r) => setTimeout(r, 300));
      return echo('too late');
    });
    const long = (await rt.runtime.submit({ input: 'long job', session_id: 'sess_r' }, { source: 'api' }))
      .task_id;
    await isAsked;
    const { task_id: redo } = await rt.runtime.submit(
      { input: 'forget that', session_id: 'sess_r', on_busy: 'rollback' },
      { source: 'api' },
    );
    await until(redo, ended);

    const recorded = await expectReplaysExactly(long);
    expect(recorded[recorded.length - 1].payload).toMatchObject({ stop_reason: 'cancelled' });
    expect(recorded.map((e) => e.type)).toContain('MODEL_CALLED');
    const turn = (await expectReplaysExactly(redo)).find((e) => e.type === 'SESSION_TURN_BEGAN');
    expect(turn?.payload).toMatchObject({ after_task_id: long, session_history: [] });
  });

  it('a task interrupted while it waited, and one rolled back, replay as recorded', async () => {
    await start((task, round) =>
      task.startsWith('wait') && round === 1 ? waitForGo : respond(`answer to ${task}`),
    );
    const submit = (input: string, on_busy?: 'interrupt' | 'rollback') =>
      rt.runtime
        .submit({ input, session_id: 'sess_w', ...(on_busy ? { on_busy } : {}) }, { source: 'api' })
        .then((r) => r.task_id);
    const waiting = await submit('wait for a go');
    await until(waiting, (ev) => ev.some((e) => e.type === 'SIGNAL_AWAITED'));
    const interrupting = await submit('interrupt it', 'interrupt');
    await until(interrupting, ended);
    const forgotten = await submit('wait to be forgotten');
    await until(forgotten, (ev) => ev.some((e) => e.type === 'SIGNAL_AWAITED'));
    const rollingBack = await submit('roll it back', 'rollback');
    await until(rollingBack, ended);

    expect((await expectReplaysExactly(waiting)).at(-1)?.payload).toMatchObject({
      stop_reason: 'interrupted',
    });
    await expectReplaysExactly(interrupting);
    expect((await expectReplaysExactly(forgotten)).at(-1)?.payload).toMatchObject({
      stop_reason: 'cancelled',
    });
    await expectReplaysExactly(rollingBack);
  });
});
