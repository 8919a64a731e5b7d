import { IdempotencyConflictError, RuntimeEvent } from '@runledger/contracts';
import { PgInlineProjection, PostgresHandle, rebuildPgProjection } from '@runledger/event-store';
import type { PoolClient } from 'pg';
import { TaskState } from '../task-state';
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

const UNIQUE_VIOLATION = '23505';

/**
 * The task-state projection on PostgreSQL, run by PgEventStore inside its
 * append transaction (which holds the append lock, so no other writer touches
 * a task row meanwhile). Same fold and row shape as SQLite's; only the SQL differs.
 */
export class PgTaskStateStore extends TaskStateStore implements PgInlineProjection {
  constructor(private readonly handle: PostgresHandle) {
    super(handle.db);
  }

  async apply(client: PoolClient, events: readonly RuntimeEvent[]): Promise<void> {
    for (const run of taskRuns(events)) {
      const { rows } = await client.query<TaskRow>('SELECT * FROM tasks WHERE task_id = $1', [run.task_id]);
      const state = foldRun(rows[0], run.events);
      if (state) await write(client, rows[0], state);
    }
  }

  async reset(client: PoolClient): Promise<void> {
    await client.query('DELETE FROM tasks');
  }

  async rebuild(): Promise<number> {
    return rebuildPgProjection(this.handle.pool, this);
  }

  async rebuildReport(): Promise<RebuildReport> {
    const picture = async (c: PoolClient) =>
      new Map(
        (await c.query<TaskRow>('SELECT * FROM tasks')).rows.map((r) => [r.task_id, JSON.stringify(r)]),
      );
    let before = new Map<string, string>();
    let after = new Map<string, string>();
    const events = await rebuildPgProjection(this.handle.pool, this, {
      before: async (c) => void (before = await picture(c)),
      after: async (c) => void (after = await picture(c)),
    });
    const ids = new Set([...before.keys(), ...after.keys()]);
    const changed = [...ids].filter((id) => before.get(id) !== after.get(id)).sort();
    return { events, tasks: after.size, changed };
  }
}

async function write(client: PoolClient, before: TaskRow | undefined, state: TaskState): Promise<void> {
  const row = stateToRow(state);
  try {
    if (!before) {
      await client.query(
        `INSERT INTO tasks (${TASK_COLUMNS.join(', ')}) VALUES (${TASK_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`,
        TASK_COLUMNS.map((c) => row[c]),
      );
      return;
    }
    const changed = changedColumns(before, row);
    if (changed.length === 0) return;
    await client.query(
      `UPDATE tasks SET ${changed.map((c, i) => `${c} = $${i + 2}`).join(', ')} WHERE task_id = $1`,
      [row.task_id, ...changed.map((c) => row[c])],
    );
  } catch (err) {
    // the unique index is the race-free guard: two submissions with one key cannot both create a task
    const pgErr = err as { code?: string; constraint?: string };
    if (pgErr.code === UNIQUE_VIOLATION && /idempotency_key/.test(pgErr.constraint ?? '')) {
      throw new IdempotencyConflictError(`idempotency key already used by another task`, {
        idempotency_key: state.idempotency_key,
      });
    }
    throw err;
  }
}
