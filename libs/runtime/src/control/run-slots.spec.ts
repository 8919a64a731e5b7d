import { createHash } from 'node:crypto';
import { InMemoryEventStore } from '@runledger/event-store';
import { NewEvent } from '@runledger/contracts';
import { ScriptedBackend } from '../model/scripted-backend';
import { TaskWriter } from '../log/task-writer';
import {
  AllowAllPolicy,
  HoldingFinals,
  InMemoryToolRegistry,
  manifestOf,
  startTestRuntime,
} from '../testing';

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
  it('one slot runs tasks in turn: the next starts once the last one is committed, so it reads what that one wrote', async () => {
    const store = new HoldingFinals(new InMemoryEventStore());
    const rt = await startTestRuntime({
      store,
      tools: digestTools(1),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend(
        { orchestrator: [plan(1), respond, plan(1), respond] },
        { answersInProcess: true },
      ),
      concurrency: 1,
    });
    try {
      const a = await rt.runtime.submit({ input: 'first' }, { source: 'api' });
      const b = await rt.runtime.submit({ input: 'second' }, { source: 'api' });
      for (let i = 0; i < 200 && store.arrivals.length < 1; i++) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, 50));
      // the first task's end is handed over but not committed: the second has not run
      expect(store.arrivals).toEqual([`${a.task_id} final`]);
      expect(await store.streamVersion(b.task_id)).toBe(1);
      store.releaseAll();
      const [pa, pb] = await Promise.all([rt.runtime.settled(a.task_id), rt.runtime.settled(b.task_id)]);
      expect([pa.final?.stop_reason, pb.final?.stop_reason]).toEqual(['completed', 'completed']);
      expect(store.arrivals).toEqual([`${a.task_id} final`, `${b.task_id} final`]);
    } finally {
      store.releaseAll();
      await rt.close();
    }
  });

  const startWith = (store: HoldingFinals, concurrency: number, tasks: number) =>
    startTestRuntime({
      store,
      tools: digestTools(1),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend(
        { orchestrator: Array.from({ length: tasks }, () => [plan(1), respond]).flat() },
        { answersInProcess: true },
      ),
      concurrency,
    });

  const arrivalsReach = async (store: HoldingFinals, n: number) => {
    for (let i = 0; i < 1000 && store.arrivals.length < n; i++) await new Promise((r) => setTimeout(r, 5));
    // long enough for a task that should not start to have run to its end
    await new Promise((r) => setTimeout(r, 200));
  };

  it('with more slots, the next task runs while an ended one commits', async () => {
    const store = new HoldingFinals(new InMemoryEventStore());
    const rt = await startWith(store, 2, 3);
    try {
      const ids: string[] = [];
      for (const input of ['first', 'second', 'third'])
        ids.push((await rt.runtime.submit({ input }, { source: 'api' })).task_id);
      await arrivalsReach(store, 3);
      // both first tasks handed their ends over and nothing is committed: one freed its slot, the third ran
      expect([...store.arrivals].sort()).toEqual(ids.map((id) => `${id} final`).sort());
      store.releaseAll();
      const ends = await Promise.all(ids.map((id) => rt.runtime.settled(id)));
      expect(ends.map((p) => p.final?.stop_reason)).toEqual(['completed', 'completed', 'completed']);
    } finally {
      store.releaseAll();
      await rt.close();
    }
  });

  it('a store that stalls holds at most twice the slots less one in tasks, the rest stay queued', async () => {
    const store = new HoldingFinals(new InMemoryEventStore());
    const rt = await startWith(store, 2, 6);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 6; i++)
        ids.push((await rt.runtime.submit({ input: `t${i}` }, { source: 'api' })).task_id);
      await arrivalsReach(store, 3);
      // the two slots' tasks (in either order: they run side by side) and one more ended; the rest wait
      expect([...store.arrivals.slice(0, 2)].sort()).toEqual(
        ids
          .slice(0, 2)
          .map((id) => `${id} final`)
          .sort(),
      );
      expect(store.arrivals.slice(2)).toEqual([`${ids[2]} final`]);
      const views = await Promise.all(ids.slice(3).map((id) => rt.runtime.progress(id)));
      expect(views.map((p) => p.status)).toEqual(['queued', 'queued', 'queued']);
      store.releaseAll();
      const ends = await Promise.all(ids.map((id) => rt.runtime.settled(id)));
      expect(ends.every((p) => p.final?.stop_reason === 'completed')).toBe(true);
    } finally {
      store.releaseAll();
      await rt.close();
    }
  });

  it('a stream window armed by a run that stopped appends nothing after it', async () => {
    const store = new InMemoryEventStore();
    const writer = await TaskWriter.open(store, 'task_1');
    await writer.append([{ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } } as NewEvent]);
    writer.stream(
      [{ type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index: 0, delta: 'd' } } as NewEvent],
      10,
    );
    writer.close();
    await new Promise((r) => setTimeout(r, 40));
    expect(await store.streamVersion('task_1')).toBe(1);
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
