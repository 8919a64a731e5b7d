import { createHash } from 'node:crypto';
import { AppendOptions, AppendResult, InMemoryEventStore, WrappingEventStore } from '@runledger/event-store';
import { NewEvent } from '@runledger/contracts';
import { ScriptedBackend } from './model/scripted-backend';
import { AllowAllPolicy, InMemoryToolRegistry, manifestOf, startTestRuntime } from './testing';

/** Holds every append that ends a task until released, and notes the order appends arrive in. */
class HoldingFinals extends WrappingEventStore {
  readonly arrivals: string[] = [];
  private release!: () => void;
  private readonly held = new Promise<void>((resolve) => (this.release = resolve));

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const final = events.find((e) => e.type === 'TASK_COMPLETED');
    if (final) {
      this.arrivals.push(`${taskId} final`);
      await this.held;
    }
    return this.inner.append(taskId, events, options);
  }

  releaseAll(): void {
    this.release();
  }
}

const plan = (steps: number) =>
  JSON.stringify({
    type: 'plan',
    steps: Array.from({ length: steps }, (_, i) => ({
      id: `s${i + 1}`,
      kind: 'tool',
      tool: 'digest',
      args: { text: `step ${i}` },
      depends_on: i === 0 ? [] : [`s${i}`],
    })),
  });
const respond = JSON.stringify({ type: 'respond', content: 'done' });

/** a pure in-process tool, declared so: its intents ride with its outcomes, nothing is awaited outside */
const digestTools = (rounds: number) =>
  new InMemoryToolRegistry().add(
    manifestOf('digest', { read_only: true, idempotent: true, timeout_ms: 30_000 }),
    async (args) => {
      let h = String(args.text);
      for (let i = 0; i < rounds; i++) h = createHash('sha256').update(h).digest('hex');
      return h;
    },
  );

describe('run slots and the event loop', () => {
  it('a task whose final event is handed over frees its slot: the next one runs while that commits', async () => {
    const store = new HoldingFinals(new InMemoryEventStore());
    const rt = await startTestRuntime({
      store,
      tools: digestTools(1),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator: [plan(1), respond, plan(1), respond] }),
      concurrency: 1,
    });
    try {
      const a = await rt.runtime.submit({ input: 'first' }, { source: 'api' });
      const b = await rt.runtime.submit({ input: 'second' }, { source: 'api' });
      // with one slot, the second task reaches its own end while the first one's end is still held
      for (let i = 0; i < 200 && store.arrivals.length < 2; i++) await new Promise((r) => setTimeout(r, 5));
      expect(store.arrivals).toEqual([`${a.task_id} final`, `${b.task_id} final`]);
      store.releaseAll();
      const [pa, pb] = await Promise.all([rt.runtime.settled(a.task_id), rt.runtime.settled(b.task_id)]);
      expect([pa.final?.stop_reason, pb.final?.stop_reason]).toEqual(['completed', 'completed']);
    } finally {
      store.releaseAll();
      await rt.close();
    }
  });

  it('a task that awaits nothing outside the process still lets timers and I/O in while it runs', async () => {
    const store = new InMemoryEventStore();
    const rt = await startTestRuntime({
      store,
      tools: digestTools(2_000),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator: [plan(20), respond] }, { answersInProcess: true }),
    });
    try {
      const { task_id } = await rt.runtime.submit({ input: 'long' }, { source: 'api' });
      let ended = false;
      const done = rt.runtime.settled(task_id).then((p) => {
        ended = true;
        return p;
      });
      // a timer due at once fires while the task still runs: the task let the event loop turn
      const endedWhenTimerFired = await new Promise<boolean>((resolve) =>
        setTimeout(() => resolve(ended), 0),
      );
      expect(endedWhenTimerFired).toBe(false);
      expect((await done).final?.stop_reason).toBe('completed');
    } finally {
      await rt.close();
    }
  });
});
