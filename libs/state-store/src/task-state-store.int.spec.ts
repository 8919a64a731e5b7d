import { IdempotencyConflictError, ValidationError } from '@runledger/contracts';
import { TaskStateStore } from './task-state-store';
import { foldTaskState } from './task-state';
import { TaskLog } from './testing/task-events';
import { sql } from 'kysely';
import { Storage } from './storage';
import { TempStorage, asNew, describeEachStorage } from './testing/temp-storage';

describeEachStorage('TaskStateStore', (openStorage) => {
  let tmp: TempStorage<Storage>;
  let sut: TaskStateStore;

  beforeEach(async () => {
    tmp = await openStorage();
    sut = tmp.storage.taskStates;
  });
  afterEach(() => tmp.dispose());

  const append = async (log: TaskLog) => {
    const version = await tmp.storage.eventStore.streamVersion(log.taskId);
    return tmp.storage.eventStore.append(log.taskId, asNew(log.events.slice(version)), { expected: version });
  };

  it('is written in the append transaction and equals the fold of the stored events', async () => {
    const log = new TaskLog('t1').received().context(1).decided(1).model('m1', 4, 2).askPermission('req_1');
    await append(log);
    const stored = await tmp.storage.eventStore.readStream('t1');
    expect(await sut.get('t1')).toEqual(foldTaskState(stored));
    expect(await sut.get('t1')).toMatchObject({ status: 'awaiting_permission', last_seq: 6 });
    // a waiting task shows the tokens it has used so far, not 0 until it ends
    expect((await sut.get('t1'))!.usage).toMatchObject({
      prompt_tokens: 4,
      completion_tokens: 2,
      total_tokens: 6,
    });

    log.resolvePermission('req_1').completed('ok');
    await append(log);
    expect(await sut.get('t1')).toMatchObject({
      status: 'completed',
      result: 'ok',
      pending_requests: [],
      last_seq: 8,
    });
    expect(await sut.get('missing')).toBeNull();
  });

  it('a stream that does not open with TASK_RECEIVED (a system stream) is not a task: no row, not listed', async () => {
    await append(new TaskLog('system:memory').model('m1', 4, 2).tool('call_1'));
    await append(new TaskLog('t1').received());
    expect(await sut.get('system:memory')).toBeNull();
    expect((await sut.list()).items.map((t) => t.task_id)).toEqual(['t1']);
    await sut.rebuild();
    expect(await sut.get('system:memory')).toBeNull();
  });

  it('refuses a second task with the same idempotency key and writes none of its events', async () => {
    await append(new TaskLog('t1').received('a', { idempotency_key: 'k1', request_hash: 'h1' }));
    await expect(
      append(new TaskLog('t2').received('b', { idempotency_key: 'k1', request_hash: 'h2' })),
    ).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect(await tmp.storage.eventStore.streamVersion('t2')).toBe(0);
    expect(await sut.get('t2')).toBeNull();
    expect(await sut.findByIdempotencyKey('k1')).toMatchObject({ task_id: 't1', request_hash: 'h1' });
    expect(await sut.findByIdempotencyKey('other')).toBeNull();
  });

  it('lists newest first, filtered by status and session, with opaque cursor pagination', async () => {
    // created_at comes from the events (TaskLog clock): t0 oldest ... t6 newest
    for (let i = 0; i < 7; i++) {
      const log = new TaskLog(`t${i}`, i % 2 === 0 ? 'ses_even' : 'ses_odd').received(`task ${i}`);
      for (const e of log.events) e.created_at = new Date(Date.UTC(2026, 0, 1, 0, i)).toISOString();
      if (i % 3 === 0) log.completed();
      await append(log);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await sut.list({ limit: 3, cursor });
      expect(page.items.length).toBeLessThanOrEqual(3);
      seen.push(...page.items.map((t) => t.task_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    expect(seen).toEqual(['t6', 't5', 't4', 't3', 't2', 't1', 't0']);

    expect((await sut.list({ status: 'completed' })).items.map((t) => t.task_id)).toEqual(['t6', 't3', 't0']);
    expect((await sut.list({ session_id: 'ses_odd', limit: 2 })).items.map((t) => t.task_id)).toEqual([
      't5',
      't3',
    ]);
    const odd2 = await sut.list({ session_id: 'ses_odd', limit: 2 });
    expect(
      (await sut.list({ session_id: 'ses_odd', limit: 2, cursor: odd2.next_cursor! })).items.map(
        (t) => t.task_id,
      ),
    ).toEqual(['t1']);
    await expect(sut.list({ cursor: 'not-a-cursor' })).rejects.toBeInstanceOf(ValidationError);
    await expect(sut.list({ limit: 0 })).rejects.toBeInstanceOf(ValidationError);
  });

  it('filters by a substring of the input, ASCII case-insensitive, LIKE wildcards taken literally', async () => {
    await append(new TaskLog('t1').received('Deploy the API\nthen smoke-test it'));
    await append(new TaskLog('t2').received('raise coverage to 50%'));
    await append(new TaskLog('t3').received('raise coverage to 500 tests'));
    await append(new TaskLog('t4').received('rename a_b to ab'));
    const ids = async (q: string) => (await sut.list({ q })).items.map((t) => t.task_id);
    expect(await ids('deploy the api')).toEqual(['t1']);
    expect(await ids('SMOKE')).toEqual(['t1']);
    expect(await ids('50%')).toEqual(['t2']);
    expect(await ids('a_b')).toEqual(['t4']);
    expect(await ids('coverage')).toEqual(['t3', 't2']);
    expect(await ids('nothing like it')).toEqual([]);
  });

  it('rebuild drops and refolds every projection: equal to the live one for a log of mixed tasks', async () => {
    const logs = [
      new TaskLog('a', 's1')
        .received('x', { idempotency_key: 'ka' })
        .context(1)
        .decided(1)
        .model('m', 3, 4)
        .tool('c1')
        .completed('A', 1),
      new TaskLog('b', 's1').received().context(1).askPermission('r1'),
      new TaskLog('c', 's2').received().askSecret('r2').provideSecret('r2').tool('c2', false).failed(),
      new TaskLog('d', 's2').received().cancelled(),
      new TaskLog('e', 's3').received(),
    ];
    // interleave the streams in the global log
    for (let round = 0; logs.some((l) => l.events.length > round * 2); round++) {
      for (const log of logs) {
        const slice = log.events.slice(round * 2, round * 2 + 2);
        if (slice.length > 0)
          await tmp.storage.eventStore.append(log.taskId, asNew(slice), { expected: round * 2 });
      }
    }
    const live = (await sut.list({ limit: 500 })).items;
    expect(live.map((t) => t.status).sort()).toEqual([
      'awaiting_permission',
      'cancelled',
      'completed',
      'failed',
      'queued',
    ]);
    // corrupt the read model so the rebuild has something to fix
    await sql`UPDATE tasks SET status = 'running', usage = '{}'`.execute(tmp.storage.db);
    await sql`INSERT INTO tasks SELECT 'ghost', status, session_id, input, last_directive, pending_requests, stop_reason, stop_detail, result, usage, rounds, last_seq, NULL, request_hash, accept_checks, budgets, created_at, updated_at FROM tasks WHERE task_id = 'a'`.execute(
      tmp.storage.db,
    );

    const folded = await sut.rebuild();
    expect(folded).toBe(logs.reduce((n, l) => n + l.events.length, 0));
    expect((await sut.list({ limit: 500 })).items).toEqual(live);
  });

  it('rebuildReport names the rows the refold changed (drift, ghosts) and none when the projection is true', async () => {
    await append(new TaskLog('a').received().context(1).decided(1).completed('A', 1));
    await append(new TaskLog('b').received().context(1));
    expect(await sut.rebuildReport()).toEqual({ events: 6, tasks: 2, changed: [] });

    await sql`UPDATE tasks SET status = 'failed' WHERE task_id = 'b'`.execute(tmp.storage.db);
    await sql`INSERT INTO tasks SELECT 'ghost', status, session_id, input, last_directive, pending_requests, stop_reason, stop_detail, result, usage, rounds, last_seq, NULL, request_hash, accept_checks, budgets, created_at, updated_at FROM tasks WHERE task_id = 'a'`.execute(
      tmp.storage.db,
    );
    expect(await sut.rebuildReport()).toEqual({ events: 6, tasks: 2, changed: ['b', 'ghost'] });
    expect(await sut.get('b')).toMatchObject({ status: 'running' });
    expect(await sut.get('ghost')).toBeNull();
  });
});
