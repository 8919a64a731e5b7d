import { RuntimeEvent } from '@runledger/contracts';
import { Kysely } from 'kysely';
import { StateStoreDatabase } from '../schema';
import { Storage } from '../storage';
import { TaskLog } from '../testing/task-events';
import { TempStorage, asNew, describeEachStorage } from '../testing/temp-storage';
import { ArchivePlanner, Candidate } from './archive-planner';
import { ArchiveRun } from './archiver';
import { openSqliteArchiver, postgresArchiver } from './open-archiver';
import { parseRetention } from './retention-policy';

/**
 * The planner's scan of finished tasks over a whole run of small batches: every finished task that
 * ended before the cutoff is read exactly once, in (created_at, task_id) order, through pages that
 * batches fill in their middle, ties of created_at, trees of a root and a child, tasks the policy
 * keeps and trees a busy session holds.
 */
const T0 = Date.parse('2026-01-01T00:00:00Z');
const NOW = Date.parse('2026-01-02T00:00:00Z');
/** completed tasks go after an hour; failed ones stay (no rule covers them) but are scanned */
const policy = parseRetention(JSON.stringify([{ older_than: '1h', status: ['completed'] }]))!;

/** The log's events shifted to start `offsetMs` after T0. */
const at = (events: RuntimeEvent[], offsetMs: number) =>
  asNew(events).map((e, i) => ({ ...e, created_at: new Date(T0 + offsetMs + i).toISOString() }));

async function seed(storage: Storage): Promise<void> {
  const put = (log: TaskLog, offsetMs: number) =>
    storage.eventStore.append(log.taskId, at(log.events, offsetMs), { expected: 'no_stream' });
  // 25 tasks received in the same millisecond, more than a page: the scan orders them by task_id
  for (let i = 0; i < 25; i++)
    await put(new TaskLog(`task_tie_${i}`, `ses_tie_${i}`).received().completed(), 0);
  for (let i = 0; i < 15; i++)
    await put(new TaskLog(`task_step_${i}`, `ses_step_${i}`).received().completed(), (i + 1) * 60_000);
  // trees of a root and a delegated child: they move together
  for (let i = 0; i < 6; i++) {
    const root = `task_root_${i}`;
    await put(new TaskLog(root, `ses_root_${i}`).received().completed(), 30 * 60_000 + i * 1000);
    const child = new TaskLog(`task_child_${i}`, `ses_root_${i}`)
      .received('sub', { parent_task_id: root, root_task_id: root, depth: 1 })
      .completed();
    await put(child, 30 * 60_000 + i * 1000 + 10);
  }
  for (let i = 0; i < 5; i++)
    await put(new TaskLog(`task_failed_${i}`, `ses_failed_${i}`).received().failed(), 40 * 60_000 + i);
  // a session with a task still running: its finished tasks stay
  for (let i = 0; i < 2; i++)
    await put(new TaskLog(`task_busy_${i}`, 'ses_busy').received().completed(), 50 * 60_000 + i);
  await put(new TaskLog('task_running', 'ses_busy').received(), 55 * 60_000);
}

async function runWith(temp: TempStorage<Storage>, batchTasks: number): Promise<ArchiveRun> {
  if (temp.storage.driver === 'postgres')
    return postgresArchiver(temp.storage.db, { batchTasks }).run(policy, NOW);
  const access = openSqliteArchiver(temp.path, { batchTasks });
  try {
    return await access.archiver.run(policy, NOW);
  } finally {
    await access.close();
  }
}

type Scan = { finishedPage: (...args: unknown[]) => Promise<Candidate[]> };

describeEachStorage('ArchivePlanner scan over a run', (open) => {
  let temp: TempStorage<Storage>;
  beforeEach(async () => {
    temp = await open();
    await seed(temp.storage);
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await temp.dispose();
  });

  it.each([1, 3, 7, 200])('batches of %i: reads every finished task once, in order', async (batchTasks) => {
    const finished = (
      await (temp.storage.db as unknown as Kysely<StateStoreDatabase>)
        .selectFrom('tasks')
        .select(['task_id', 'created_at'])
        .where('status', 'in', ['completed', 'failed', 'cancelled'])
        .execute()
    )
      .sort((a, b) =>
        a.created_at === b.created_at
          ? a.task_id < b.task_id
            ? -1
            : 1
          : a.created_at < b.created_at
            ? -1
            : 1,
      )
      .map((t) => t.task_id);
    expect(finished).toHaveLength(25 + 15 + 12 + 5 + 2);
    const scan = jest.spyOn(ArchivePlanner.prototype as unknown as Scan, 'finishedPage');
    const run = await runWith(temp, batchTasks);
    const pages = await Promise.all(scan.mock.results.map((r) => r.value as Promise<Candidate[]>));
    const read = pages.flat().map((c) => c.task_id);
    expect(read).toEqual(finished);
    // what moved: every completed tree but the busy session's, each once, batches as asked
    const moved = finished.filter((id) => !id.startsWith('task_failed_') && !id.startsWith('task_busy_'));
    expect([...run.tasks].sort()).toEqual([...moved].sort());
    for (const s of run.segments) expect(s.task_ids.length).toBeLessThanOrEqual(Math.max(batchTasks, 2));
    expect(run.skipped.map((s) => s.task_id).sort()).toEqual(['task_busy_0', 'task_busy_1']);
  });

  it('a second run reads only what the first left', async () => {
    await runWith(temp, 4);
    const scan = jest.spyOn(ArchivePlanner.prototype as unknown as Scan, 'finishedPage');
    const again = await runWith(temp, 4);
    const read = (await Promise.all(scan.mock.results.map((r) => r.value as Promise<Candidate[]>))).flat();
    expect(read.map((c) => c.task_id).sort()).toEqual(
      ['task_busy_0', 'task_busy_1', ...Array.from({ length: 5 }, (_, i) => `task_failed_${i}`)].sort(),
    );
    expect(again.tasks).toEqual([]);
  });
});
