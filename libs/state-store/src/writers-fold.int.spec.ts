import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { writerChecked } from '@runledger/event-store';
import { TaskState, evolve, foldTaskState } from './task-state';
import { TaskLog } from './testing/task-events';
import { TempStorage, asNew, createTempStorage } from './testing/temp-storage';

/** As a writer hands them: checked and folded (the marker each test puts in the fold shows whose fold the row took). */
const handed = (events: readonly RuntimeEvent[]): NewEvent[] =>
  asNew(events).map((e, i) => writerChecked({ ...e, event_id: events[i].event_id }));

/** The fold of `events` onto `from`, with `result` set apart: a row that holds it took this fold. */
const foldedWith = (from: TaskState | null, events: readonly RuntimeEvent[], result: string): TaskState => ({
  ...events.reduce<TaskState | null>((s, e) => evolve(s, e), from)!,
  result,
});

for (const mode of ['inline', 'thread'] as const)
  describe(`the tasks projection and a writer's fold (SQLite, appends ${mode})`, () => {
    let tmp: TempStorage;
    beforeEach(async () => {
      tmp = await createTempStorage(mode === 'thread' ? { writerThread: true } : {});
      await tmp.storage.eventStore.ready?.();
    });
    afterEach(() => tmp.dispose());

    const row = () => tmp.storage.taskStates.get('t1');

    it("takes the writer's fold when its row stands where the fold began; otherwise reads, folds and writes the row", async () => {
      const log = new TaskLog('t1').received().context(1).decided(1);
      const store = tmp.storage.eventStore;
      const first = log.events.slice(0, 1);
      await store.append('t1', handed(first), {
        expected: 'no_stream',
        folded: { base: 0, state: foldedWith(null, first, 'first fold') },
      });
      expect(await row()).toMatchObject({ last_seq: 1, result: 'first fold' });

      // the row moved on from where this fold began (a writer that missed an append): the row's own fold
      const stale = foldTaskState(first);
      const second = log.events.slice(1);
      await store.append('t1', handed(second), {
        expected: 1,
        folded: { base: 0, state: foldedWith(stale, second, 'stale fold') },
      });
      expect(await row()).toMatchObject({ last_seq: 3, result: 'first fold' });

      // events that are not the writer's as it folded them (copies, another caller's): the row's own fold
      const third = log.model('m1', 4, 2).events.slice(3);
      await store.append('t1', asNew(third), {
        expected: 3,
        folded: { base: 3, state: foldedWith(await row(), third, 'not its events') },
      });
      const afterModel = log.events.length;
      expect(await row()).toMatchObject({
        last_seq: afterModel,
        result: 'first fold',
        usage: { total_tokens: 6 },
      });

      const fourth = log.askPermission('req_1').events.slice(afterModel);
      await store.append('t1', handed(fourth), {
        expected: afterModel,
        folded: { base: afterModel, state: foldedWith(await row(), fourth, 'taken') },
      });
      expect(await row()).toMatchObject({
        last_seq: log.events.length,
        status: 'awaiting_permission',
        result: 'taken',
      });
    });

    it('a fold that does not end where the append does, or of a stream not opened by TASK_RECEIVED, is not taken', async () => {
      const log = new TaskLog('t1').received().context(1);
      const store = tmp.storage.eventStore;
      await store.append('t1', handed(log.events.slice(0, 1)), { expected: 'no_stream' });
      expect(await row()).toMatchObject({ last_seq: 1 });
      await store.append('t1', handed(log.events.slice(1)), {
        expected: 1,
        folded: { base: 1, state: foldedWith(await row(), log.events.slice(0, 1), 'one event short') },
      });
      expect(await row()).toMatchObject({ last_seq: 2, result: null });
      const system = new TaskLog('system:memory').model('m1', 1, 1);
      await store.append('system:memory', handed(system.events), {
        expected: 'no_stream',
        folded: { base: 0, state: foldedWith(null, system.events, 'not a task') },
      });
      expect(await tmp.storage.taskStates.get('system:memory')).toBeNull();
    });
  });
