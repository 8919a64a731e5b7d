import { IdempotencyConflictError, RuntimeEvent } from '@runledger/contracts';
import {
  CopySealer,
  PgInlineProjection,
  PostgresHandle,
  postgresCatalog,
  rebuildPgProjection,
} from '@runledger/event-store';
import type { PoolClient } from 'pg';
import { ModelUsageRow, modelUsageOf, modelUsageUpsert } from '../model-usage';
import {
  RebuildReport,
  TASK_COLUMNS,
  TaskRow,
  TaskStateStore,
  changedColumns,
  foldRun,
  stateToRow,
  taskRuns,
} from '../task-state-store';
import { OpenCopies, TaskRowCodec } from '../sealed-task-rows';

const UNIQUE_VIOLATION = '23505';

/**
 * The task-state projection on PostgreSQL, run by PgEventStore inside its
 * append transaction (which holds the append lock, so no other writer touches
 * a task row meanwhile). Same fold and row shape as SQLite's; only the SQL differs.
 */
export class PgTaskStateStore extends TaskStateStore implements PgInlineProjection {
  private readonly codec = new TaskRowCodec();
  private readonly sealCopies: boolean;

  /** `sealCopies`: a rebuild seals the personal columns (erasure on), as the appends' projection does */
  constructor(
    private readonly handle: PostgresHandle,
    options: { openCopies?: OpenCopies; sealCopies?: boolean } = {},
  ) {
    super(handle.db, postgresCatalog(handle.db), options.openCopies);
    this.sealCopies = options.sealCopies === true;
  }

  /** Every task of the group read in one query, folded in memory, the changed rows written in one upsert. */
  async apply(client: PoolClient, events: readonly RuntimeEvent[], copies?: CopySealer): Promise<void> {
    const runs = taskRuns(events);
    const { rows } = await client.query<TaskRow>('SELECT * FROM tasks WHERE task_id = ANY($1)', [
      [...new Set(runs.map((r) => r.task_id))],
    ]);
    const stored = new Map(rows.map((r) => [r.task_id, r]));
    const before = new Map(rows.map((r) => [r.task_id, { stored: r, clear: this.codec.open(r, copies) }]));
    const current = new Map<string, TaskRow>();
    for (const run of runs) {
      const state = foldRun(current.get(run.task_id) ?? before.get(run.task_id)?.clear, run.events);
      if (state) current.set(run.task_id, stateToRow(state));
    }
    const changed = [...current.values()]
      .map((row) => this.codec.seal(row, copies, before.get(row.task_id)))
      .filter((row) => {
        const was = stored.get(row.task_id);
        return !was || changedColumns(was, row).length > 0;
      });
    if (changed.length > 0) await upsert(client, changed);
    for (const row of modelUsageOf(events))
      await client.query(
        USAGE_UPSERT,
        USAGE_COLUMNS.map((c) => row[c]),
      );
  }

  async reset(client: PoolClient): Promise<void> {
    await client.query('DELETE FROM tasks');
    await client.query('DELETE FROM model_usage');
  }

  /** A rebuild folds catalogued tasks for their usage; their rows stay the catalog's. */
  async dropCatalogued(client: PoolClient, taskIds: readonly string[]): Promise<void> {
    await client.query('DELETE FROM tasks WHERE task_id = ANY($1)', [taskIds]);
  }

  async rebuild(): Promise<number> {
    return rebuildPgProjection(this.handle.pool, this, {}, { sealCopies: this.sealCopies });
  }

  async rebuildReport(): Promise<RebuildReport> {
    const picture = async (c: PoolClient) =>
      new Map((await c.query<TaskRow>('SELECT * FROM tasks')).rows.map((r) => [r.task_id, r]));
    let before = new Map<string, TaskRow>();
    let after = new Map<string, TaskRow>();
    const events = await rebuildPgProjection(
      this.handle.pool,
      this,
      {
        before: async (c) => void (before = await picture(c)),
        after: async (c) => void (after = await picture(c)),
      },
      { sealCopies: this.sealCopies },
    );
    return { events, tasks: after.size, changed: await this.changedRows(before, after) };
  }
}

const USAGE_COLUMNS: (keyof ModelUsageRow)[] = [];
const USAGE_UPSERT = modelUsageUpsert((c, i) => {
  USAGE_COLUMNS.push(c);
  return `$${i + 1}`;
});

const UPSERT_SET = TASK_COLUMNS.filter((c) => c !== 'task_id')
  .map((c) => `${c} = excluded.${c}`)
  .join(', ');

async function upsert(client: PoolClient, rows: readonly TaskRow[]): Promise<void> {
  const width = TASK_COLUMNS.length;
  const values = rows
    .map((_, r) => `(${TASK_COLUMNS.map((_, c) => `$${r * width + c + 1}`).join(', ')})`)
    .join(', ');
  try {
    await client.query(
      `INSERT INTO tasks (${TASK_COLUMNS.join(', ')}) VALUES ${values}
       ON CONFLICT (task_id) DO UPDATE SET ${UPSERT_SET}`,
      rows.flatMap((row) => TASK_COLUMNS.map((c) => row[c])),
    );
  } catch (err) {
    // the unique index is the race-free guard: two submissions with one key cannot both create a task
    const pgErr = err as { code?: string; constraint?: string };
    if (pgErr.code === UNIQUE_VIOLATION && /idempotency_key/.test(pgErr.constraint ?? '')) {
      throw new IdempotencyConflictError(`idempotency key already used by another task`, {
        idempotency_key: rows.length === 1 ? rows[0].idempotency_key : null,
      });
    }
    throw err;
  }
}
