import {
  IllegalStateError,
  NotFoundError,
  SEALED_KEY,
  TaskStatus,
  ValidationError,
  isPersonalField,
  isSystemSession,
  isTerminalStatus,
} from '@runledger/contracts';
import {
  APPEND_LOCK_SQL,
  Database,
  EventStore,
  PostgresHandle,
  SqliteEventStore,
  SqliteHandle,
  eraseKey,
} from '@runledger/event-store';
import { Kysely } from 'kysely';
import { StateStoreDatabase, StateStoreTables, TasksTable } from '../schema';
import { PERSONAL_TASK_COLUMNS, TaskStateStore, foldRun, stateToRow } from '../task-state-store';

/** The stream erasures are recorded in (SESSION_ERASED): ids only, never content. */
export const ERASURE_STREAM = 'system:erasure';

/** What an erasure did. */
export interface ErasureReport {
  session_id: string;
  erased_at: string;
  /** false: the key was destroyed by an earlier erasure (this one scrubbed the copies again) */
  key_destroyed: boolean;
  /** the session's tasks, live and archived */
  task_ids: string[];
  /** live events of the session stored sealed: their content is gone with the key */
  sealed_events: number;
  /**
   * live events stored in clear (written while RUNLEDGER_ERASURE was off): every reader serves
   * them erased from now on, but their text stays in the database file (and its backups)
   */
  clear_events: number;
  checkpoints_deleted: number;
}

/** Where the storage keeps the data keys. */
export interface KeyDestroyer {
  /** destroys a session's data key; false when it was destroyed before */
  destroy(sessionId: string, at: string): Promise<boolean>;
  /** after the read models were scrubbed: what the driver does so their old bytes leave its files */
  afterScrub(): Promise<void>;
}

const MAX_ID = 200;

/**
 * Erasure of one session by crypto-shredding: its data key is destroyed (so every sealed payload of
 * it, live, archived or in a backup, reads as erased), the copies the read models made of its
 * content (the tasks rows' input, result...; checkpoints) are refolded from the log as it now reads
 * or deleted, and SESSION_ERASED is appended to ERASURE_STREAM. A session with a task not finished
 * is refused: cancel it first. Memory entries are the memory module's (MemoryService.forgetSession).
 */
export class SessionErasure {
  private readonly db: Kysely<StateStoreDatabase>;

  constructor(
    db: Kysely<Database>,
    private readonly events: EventStore,
    private readonly keys: KeyDestroyer,
    private readonly states: TaskStateStore,
  ) {
    this.db = db.withTables<StateStoreTables>();
  }

  /**
   * What `erase` would erase, without erasing: the session's tasks, live and in the archive's
   * catalog (404 when it has none).
   */
  async tasksOf(sessionId: string): Promise<Array<{ task_id: string; status: TaskStatus }>> {
    checkSessionId(sessionId);
    const tasks = await this.states.sessionStatuses(sessionId);
    if (tasks.length === 0)
      throw new NotFoundError(`session ${sessionId} has no tasks`, { session_id: sessionId });
    return tasks;
  }

  async erase(sessionId: string): Promise<ErasureReport> {
    const tasks = await this.tasksOf(sessionId);
    const running = tasks.filter((t) => !isTerminalStatus(t.status));
    if (running.length > 0)
      throw new IllegalStateError(
        `session ${sessionId} has ${running.length} task(s) not finished; cancel them before erasing it`,
        { session_id: sessionId, unfinished: running.map((t) => t.task_id) },
      );
    const taskIds = tasks.map((t) => t.task_id);
    const counts = await this.countEvents(sessionId);
    const erasedAt = new Date().toISOString();
    const destroyed = await this.keys.destroy(sessionId, erasedAt);
    for (const id of taskIds) await this.refoldRow(id);
    const checkpoints = await this.db
      .deleteFrom('checkpoints')
      .where('task_id', 'in', taskIds)
      .executeTakeFirst();
    await this.keys.afterScrub();
    if (destroyed)
      await this.events.append(
        ERASURE_STREAM,
        [
          {
            type: 'SESSION_ERASED',
            payload: { session_id: sessionId, task_ids: taskIds, erased_at: erasedAt },
          },
        ],
        { expected: 'any' },
      );
    return {
      session_id: sessionId,
      erased_at: erasedAt,
      key_destroyed: destroyed,
      task_ids: taskIds,
      ...counts,
      checkpoints_deleted: Number(checkpoints.numDeletedRows),
    };
  }

  /**
   * The row's content columns as the fold of its (now erased) events reads them: the live row, or a
   * catalogued task's row in the archive's catalog.
   */
  private async refoldRow(taskId: string): Promise<void> {
    const state = foldRun(undefined, await this.events.readStream(taskId));
    if (!state) return;
    const row = stateToRow(state);
    const scrubbed = Object.fromEntries(PERSONAL_TASK_COLUMNS.map((c) => [c, row[c]]));
    const live = await this.db
      .updateTable('tasks')
      .set(scrubbed)
      .where('task_id', '=', taskId)
      .executeTakeFirst();
    if (Number(live.numUpdatedRows) > 0) return;
    await this.states.catalog.write((db) =>
      db
        .withTables<{ catalog_tasks: TasksTable }>()
        .updateTable('catalog_tasks')
        .set(scrubbed)
        .where('task_id', '=', taskId)
        .execute(),
    );
  }

  /** The session's live events by how they are stored: sealed, or in clear with personal fields. */
  private async countEvents(sessionId: string): Promise<{ sealed_events: number; clear_events: number }> {
    const rows = await this.db
      .withTables<{ events: { session_id: string; payload: string } }>()
      .selectFrom('events')
      .select('payload')
      .where('session_id', '=', sessionId)
      .execute();
    let sealed = 0;
    let clear = 0;
    for (const { payload } of rows) {
      const p = JSON.parse(payload) as Record<string, unknown>;
      if (SEALED_KEY in p) sealed++;
      else if (Object.entries(p).some(([k, v]) => isPersonalField(k, v))) clear++;
    }
    return { sealed_events: sealed, clear_events: clear };
  }
}

function checkSessionId(sessionId: string): void {
  if (typeof sessionId !== 'string' || sessionId.length === 0 || sessionId.length > MAX_ID)
    throw new ValidationError(`session_id must be a non-empty string of at most ${MAX_ID} characters`, {
      field: 'session_id',
    });
  if (isSystemSession(sessionId))
    throw new ValidationError(`${sessionId} is the system's own stream, not a person's session`, {
      field: 'session_id',
    });
}

/** SQLite: the key leaves `<db>.keys`; the WAL is checkpointed after the scrub so the rows' old pages leave it. */
export const sqliteKeyDestroyer = (store: SqliteEventStore, handle: SqliteHandle): KeyDestroyer => ({
  async destroy(sessionId, at) {
    if (!store.dataKeys) throw new IllegalStateError('erasure needs a database file: :memory: keeps no keys');
    return store.dataKeys.erase(sessionId, at);
  },
  async afterScrub() {
    try {
      handle.raw.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // a reader holds the WAL: the next checkpoint copies the scrubbed pages
    }
  },
});

/**
 * PostgreSQL: under the append lock (no append commits with a key it read before the erasure), then
 * VACUUM FULL rewrites the small table so the destroyed key's old row version leaves its files.
 */
export const pgKeyDestroyer = (handle: PostgresHandle): KeyDestroyer => ({
  async destroy(sessionId, at) {
    const client = await handle.pool.connect();
    let destroyed: boolean;
    try {
      await client.query(`BEGIN; ${APPEND_LOCK_SQL}`);
      destroyed = await eraseKey(client, sessionId, at);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    await handle.pool.query('VACUUM FULL data_keys');
    return destroyed;
  },
  async afterScrub() {
    // the tasks rows' old versions go with autovacuum; VACUUM FULL of tasks would lock every task read
  },
});
