import { ConcurrencyError, NotFoundError } from '@runledger/contracts';
import { CheckpointStore } from './checkpoint-store';
import { foldTaskState } from './task-state';
import { TaskLog } from './testing/task-events';
import { sql } from 'kysely';
import { Storage } from './storage';
import { TempStorage, asNew, describeEachStorage } from './testing/temp-storage';

describeEachStorage('CheckpointStore', (openStorage) => {
  let tmp: TempStorage<Storage>;
  let sut: CheckpointStore;

  beforeEach(async () => {
    tmp = await openStorage();
    sut = tmp.storage.checkpoints;
  });
  afterEach(() => tmp.dispose());

  /** rewrite every stored snapshot as `edit` changes it, behind the store's back */
  const editSnapshots = async (edit: (snapshot: Record<string, unknown>) => void) => {
    const { rows } = await sql<{
      checkpoint_id: string;
      state: string;
    }>`SELECT checkpoint_id, state FROM checkpoints`.execute(tmp.storage.db);
    for (const row of rows) {
      const snapshot = JSON.parse(row.state) as Record<string, unknown>;
      edit(snapshot);
      await sql`UPDATE checkpoints SET state = ${JSON.stringify(snapshot)} WHERE checkpoint_id = ${row.checkpoint_id}`.execute(
        tmp.storage.db,
      );
    }
  };

  const appendAll = async (log: TaskLog) => {
    const version = await tmp.storage.eventStore.streamVersion(log.taskId);
    await tmp.storage.eventStore.append(log.taskId, asNew(log.events.slice(version)), { expected: version });
  };

  it('records each checkpoint with a CHECKPOINT_SAVED event that names it', async () => {
    await appendAll(new TaskLog('t1').received().context(1).decided(1));
    const saved = await sut.save('t1', 'after round 1', { memory: ['m1'], round: 1 });
    const stream = await tmp.storage.eventStore.readStream('t1');
    expect(stream[3]).toMatchObject({
      type: 'CHECKPOINT_SAVED',
      payload: { checkpoint_id: saved.checkpoint_id, label: 'after round 1', at_sequence: 3 },
    });
    expect(saved).toMatchObject({ at_sequence: 3, event_sequence: 4, context: { memory: ['m1'], round: 1 } });
    expect(saved.state).toEqual(await tmp.storage.taskStates.get('t1'));
  });

  it('loads latest checkpoint + events after it, equal to a full fold of the stream', async () => {
    const log = new TaskLog('t1').received().context(1).decided(1).model('m1', 5, 5);
    await appendAll(log);
    await sut.save('t1', 'first', { n: 1 });
    log.events.push(...(await tmp.storage.eventStore.readStream('t1', { after_seq: log.events.length })));
    log.tool('c1').context(2).decided(2);
    await appendAll(log);
    const second = await sut.save('t1', 'second', { n: 2 });
    log.events.push(...(await tmp.storage.eventStore.readStream('t1', { after_seq: log.events.length })));
    log.askPermission('r1').resolvePermission('r1').model('m2', 1, 2).completed('fin', 2);
    await appendAll(log);

    const loaded = await sut.load('t1');
    const full = foldTaskState(await tmp.storage.eventStore.readStream('t1'));
    expect(loaded!.checkpoint).toMatchObject({
      checkpoint_id: second.checkpoint_id,
      label: 'second',
      context: { n: 2 },
    });
    expect(loaded!.events_after.map((e) => e.type)).toEqual([
      'TASK_AWAITING_PERMISSION',
      'PERMISSION_RESOLVED',
      'MODEL_CALLED',
      'MODEL_RESPONDED',
      'TASK_COMPLETED',
    ]);
    expect(loaded!.state).toEqual(full);
    expect(loaded!.state).toEqual(await tmp.storage.taskStates.get('t1'));
  });

  it('without a checkpoint, loads by a full fold; an unknown task loads as null and cannot be checkpointed', async () => {
    await appendAll(new TaskLog('t1').received().context(1));
    const loaded = await sut.load('t1');
    expect(loaded!.checkpoint).toBeNull();
    expect(loaded!.events_after).toHaveLength(2);
    expect(await sut.load('nope')).toBeNull();
    await expect(sut.save('nope', 'x', {})).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a checkpoint raced by another append fails with ConcurrencyError and stores no snapshot', async () => {
    await appendAll(new TaskLog('t1').received());
    const states = tmp.storage.taskStates;
    const realGet = states.get.bind(states);
    // another writer appends between the read of the state and the checkpoint's append
    jest.spyOn(states, 'get').mockImplementationOnce(async (id) => {
      const s = await realGet(id);
      await appendAll(new TaskLog('t1').received().context(1));
      return s;
    });
    await expect(sut.save('t1', 'late', {})).rejects.toBeInstanceOf(ConcurrencyError);
    expect(await sut.latest('t1')).toBeNull();
  });

  it('rebuild recomputes each snapshot from the log, keeping its context; a true snapshot is left alone', async () => {
    await appendAll(new TaskLog('t1').received().context(1).decided(1));
    const saved = await sut.save('t1', 'after round 1', { round: 1 });
    expect(await sut.rebuild()).toEqual({ checkpoints: 1, changed: [] });

    await editSnapshots((snapshot) => {
      const state = snapshot.state as Record<string, unknown>;
      state.status = 'completed';
      state.rounds = 9;
    });
    expect((await sut.latest('t1'))!.state.status).toBe('completed');
    expect(await sut.rebuild()).toEqual({ checkpoints: 1, changed: [saved.checkpoint_id] });
    const rebuilt = await sut.latest('t1');
    expect(rebuilt!.state).toEqual(saved.state);
    expect(rebuilt!.context).toEqual({ round: 1 });
    expect((await sut.load('t1'))!.state).toEqual(
      foldTaskState(await tmp.storage.eventStore.readStream('t1')),
    );
  });

  it('a snapshot of an unknown schema version is ignored: load falls back to the full fold, rebuild names and rewrites it', async () => {
    await appendAll(new TaskLog('t1').received().context(1).decided(1));
    const saved = await sut.save('t1', 'after round 1', null);
    await editSnapshots((snapshot) => {
      snapshot.$schema_version = 99;
    });
    expect(await sut.latest('t1')).toBeNull();
    const loaded = await sut.load('t1');
    expect(loaded!.checkpoint).toBeNull();
    expect(loaded!.events_after).toHaveLength(4);
    expect(await sut.rebuild()).toEqual({ checkpoints: 1, changed: [saved.checkpoint_id] });
    expect((await sut.latest('t1'))!.state).toEqual(saved.state);
  });

  it('record stores the snapshot of a CHECKPOINT_SAVED appended with other events, from the previous checkpoint and the tail once the task moved on', async () => {
    const log = new TaskLog('t1').received().context(1);
    await appendAll(log);
    await sut.save('t1', 'first', null);
    const { events } = await tmp.storage.eventStore.append(
      't1',
      [
        ...asNew(new TaskLog('t1').received().context(1).decided(1).events.slice(2)),
        {
          type: 'CHECKPOINT_SAVED',
          payload: { checkpoint_id: 'ckpt_batch', label: 'round 1', at_sequence: 4 },
        },
      ],
      { expected: 3 },
    );
    // the task moved on past the checkpoint: its projection row is no longer the state at it
    await tmp.storage.eventStore.append(
      't1',
      asNew(new TaskLog('t1').received().context(2).events.slice(1)),
      {
        expected: 5,
      },
    );
    const readStream = jest.spyOn(tmp.storage.eventStore, 'readStream');
    const recorded = await sut.record(events[events.length - 1], { mine: true });
    // only the events after the first checkpoint were read
    expect(readStream.mock.calls.map(([, o]) => o)).toEqual([{ after_seq: 3, limit: 2 }]);
    const full = foldTaskState((await tmp.storage.eventStore.readStream('t1')).slice(0, 5));
    expect(recorded).toMatchObject({
      checkpoint_id: 'ckpt_batch',
      at_sequence: 4,
      event_sequence: 5,
      state: full,
    });
    expect(await sut.latest('t1')).toMatchObject({ checkpoint_id: 'ckpt_batch', context: { mine: true } });
    expect(await sut.latest('t1', 4)).toMatchObject({ event_sequence: 3 });
  });

  it('record right after the append that ended with the CHECKPOINT_SAVED takes the projection row: no event is read', async () => {
    await appendAll(new TaskLog('t1').received().context(1));
    const { events } = await tmp.storage.eventStore.append(
      't1',
      [
        ...asNew(new TaskLog('t1').received().context(1).decided(1).events.slice(2)),
        {
          type: 'CHECKPOINT_SAVED',
          payload: { checkpoint_id: 'ckpt_row', label: 'round 1', at_sequence: 3 },
        },
      ],
      { expected: 2 },
    );
    const readStream = jest.spyOn(tmp.storage.eventStore, 'readStream');
    const recorded = await sut.record(events[events.length - 1], null);
    expect(readStream).not.toHaveBeenCalled();
    const full = foldTaskState(await tmp.storage.eventStore.readStream('t1'));
    expect(recorded).toMatchObject({ checkpoint_id: 'ckpt_row', event_sequence: 4, state: full });
    expect(await sut.rebuild()).toEqual({ checkpoints: 1, changed: [] });
  });

  it("record with the writer's own state through the CHECKPOINT_SAVED reads nothing; a state of another sequence is not taken", async () => {
    await appendAll(new TaskLog('t1').received().context(1));
    const { events } = await tmp.storage.eventStore.append(
      't1',
      [
        {
          type: 'CHECKPOINT_SAVED',
          payload: { checkpoint_id: 'ckpt_own', label: 'round 1', at_sequence: 2 },
        },
      ],
      { expected: 2 },
    );
    const full = foldTaskState(await tmp.storage.eventStore.readStream('t1'))!;
    const readStream = jest.spyOn(tmp.storage.eventStore, 'readStream');
    const get = jest.spyOn(tmp.storage.taskStates, 'get');
    expect(await sut.record(events[0], null, full)).toMatchObject({ checkpoint_id: 'ckpt_own', state: full });
    expect(readStream).not.toHaveBeenCalled();
    expect(get).not.toHaveBeenCalled();
    // a state one event behind is not this checkpoint's: the store works it out itself
    const stale = foldTaskState((await tmp.storage.eventStore.readStream('t1')).slice(0, 2))!;
    const { events: again } = await tmp.storage.eventStore.append(
      't1',
      [{ type: 'CHECKPOINT_SAVED', payload: { checkpoint_id: 'ckpt_stale', label: 'x', at_sequence: 3 } }],
      { expected: 3 },
    );
    const recorded = await sut.record(again[0], null, stale);
    expect(recorded.state).toEqual(foldTaskState(await tmp.storage.eventStore.readStream('t1')));
    expect(await sut.rebuild()).toEqual({ checkpoints: 2, changed: [] });
  });

  it("rebuild with a context fold names a checkpoint whose context differs from the log's and rewrites it", async () => {
    await appendAll(new TaskLog('t1').received().context(1));
    const saved = await sut.save('t1', 'first', { seen: 3 });
    const contextOf = (_: string, events: readonly unknown[]) => ({ seen: events.length });
    expect(await sut.rebuild(contextOf)).toEqual({ checkpoints: 1, changed: [] });
    await sql`UPDATE checkpoints SET context = '{"seen":1}'`.execute(tmp.storage.db);
    expect(await sut.rebuild(contextOf)).toEqual({ checkpoints: 1, changed: [saved.checkpoint_id] });
    expect((await sut.latest('t1'))!.context).toEqual({ seen: 3 });
  });

  it('a checkpoint saved without a context: latest can skip contexts or require one; rebuild leaves it without', async () => {
    await appendAll(new TaskLog('t1').received().context(1));
    const withContext = await sut.save('t1', 'first', { seen: 3 });
    const without = await sut.save('t1', 'second', null);
    const contextOf = (_: string, events: readonly unknown[]) => ({ seen: events.length });

    expect(await sut.latest('t1')).toMatchObject({ checkpoint_id: without.checkpoint_id, context: null });
    expect(await sut.latest('t1', undefined, 'require')).toMatchObject({
      checkpoint_id: withContext.checkpoint_id,
      context: { seen: 3 },
    });
    expect(await sut.latest('t1', withContext.event_sequence, 'skip')).toMatchObject({
      checkpoint_id: withContext.checkpoint_id,
      context: null,
      state: withContext.state,
    });
    expect(await sut.rebuild(contextOf)).toEqual({ checkpoints: 2, changed: [] });
    expect((await sut.latest('t1'))!.context).toBeNull();
  });
});
