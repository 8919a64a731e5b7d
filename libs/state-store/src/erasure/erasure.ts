import {
  IllegalStateError,
  NewEvent,
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
  CatalogDatabase,
  Database,
  EventStore,
  PostgresHandle,
  SqliteEventStore,
  Queryable,
  SqliteHandle,
  eraseSessionKeys,
  eraseStreamKeys,
  keyIdOf,
} from '@runledger/event-store';
import { Kysely, sql } from 'kysely';
import { chunks, isPostgres } from '../archive/archive-planner';
import { StateStoreDatabase, StateStoreTables, TasksTable } from '../schema';
import { PERSONAL_TASK_COLUMNS, TaskStateStore, foldRun, stateToRow } from '../task-state-store';

/** The stream erasures are recorded in (SESSION_ERASED, TASK_TREE_ERASED): ids only, never content. */
export const ERASURE_STREAM = 'system:erasure';

/** What an erasure did. */
export interface ErasureReport {
  session_id: string;
  erased_at: string;
  /** false: the keys were destroyed by an earlier erasure (this one scrubbed the copies again) */
  key_destroyed: boolean;
  /** the erased tasks, live, archived and catalogued: the session's, or the tree's */
  task_ids: string[];
  /** live events stored sealed under the erased keys: their content is gone with the keys */
  sealed_events: number;
  /**
   * live events stored in clear (written while RUNLEDGER_ERASURE was off), or, for a tree, sealed
   * under its session's single key (a store sealed one key per session): every reader serves them
   * erased from now on, but their text stays readable in the database file (and its backups) until
   * the session is erased
   */
  clear_events: number;
  /**
   * events in the archive's segments (archived, or catalogued) under the erased keys: sealed, their
   * content is gone with the keys; stored in clear, they are served erased from now on
   */
  archived_events: number;
  checkpoints_deleted: number;
}

/** What a tree's erasure did. */
export interface TreeErasureReport extends ErasureReport {
  root_task_id: string;
  /** the streams whose keys were destroyed: the tree's tasks and their companion streams */
  streams: string[];
}

/** Where the storage keeps the data keys. */
export interface KeyDestroyer {
  /** destroys a session's own key and its streams' keys; false when they were destroyed before */
  destroySession(sessionId: string, at: string): Promise<boolean>;
  /** destroys the keys of a tree's streams (tombstones for those without); how many were not destroyed before */
  destroyStreams(sessionId: string, streamIds: readonly string[], at: string): Promise<number>;
  /** the id of the session's own key (stores sealed one key per session), or null */
  sessionKeyId(sessionId: string): Promise<string | null>;
  /** after the read models were scrubbed: what the driver does so their old bytes leave its files */
  afterScrub(): Promise<void>;
}

const MAX_ID = 200;

/** A task tree: its root, its tasks (root and delegated children, live, archived or catalogued), its session. */
interface TaskTree {
  root_task_id: string;
  session_id: string;
  tasks: Array<{ task_id: string; status: TaskStatus }>;
  /** archived streams of the tree that are no task (companions moved with it) */
  archived_streams: string[];
}

/**
 * Erasure by crypto-shredding, of a session or of one task tree of it: the data keys are destroyed
 * (so every sealed payload under them, live, archived or in a backup, reads as erased), the copies
 * the read models made of the content (the tasks rows' input, result...; checkpoints) are refolded
 * from the log as it now reads or deleted, and SESSION_ERASED / TASK_TREE_ERASED is appended to
 * ERASURE_STREAM once. Refused while a task concerned is not finished: cancel it first. Memory
 * entries are the memory module's (MemoryService.forgetSession / forgetTasks).
 */
export class Erasure {
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
    const counts = {
      ...(await this.countEvents({ session_id: sessionId }, null)),
      archived_events: await this.countArchivedEvents({ session_id: sessionId }),
    };
    const erasedAt = new Date().toISOString();
    const destroyed = await this.keys.destroySession(sessionId, erasedAt);
    const checkpoints = await this.scrub(taskIds);
    if (destroyed)
      await this.record({
        type: 'SESSION_ERASED',
        payload: { session_id: sessionId, task_ids: taskIds, erased_at: erasedAt },
      });
    return {
      session_id: sessionId,
      erased_at: erasedAt,
      key_destroyed: destroyed,
      task_ids: taskIds,
      ...counts,
      checkpoints_deleted: checkpoints,
    };
  }

  /**
   * The task tree `taskId` belongs to (the tree of its root: a child's content is in its parent's
   * events too), 404 for an unknown task.
   */
  async treeOf(taskId: string): Promise<TaskTree> {
    checkTaskId(taskId);
    // live, or in the archive's catalog
    const row = await this.states.get(taskId);
    if (!row) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    const [first] = await this.events.readStream(taskId, { limit: 1 });
    const root =
      first?.type === 'TASK_RECEIVED'
        ? ((first.payload.root_task_id as string | undefined) ?? taskId)
        : taskId;
    const members = new Set([root, taskId, ...(await this.liveMembers(root))]);
    const archived = await this.archivedMembers(root);
    for (const id of archived) members.add(id);
    const tasks = (await Promise.all([...members].sort().map((id) => this.states.get(id)))).flatMap((s) =>
      s ? [{ task_id: s.task_id, status: s.status, session_id: s.session_id }] : [],
    );
    const isTask = new Set(tasks.map((t) => t.task_id));
    return {
      root_task_id: root,
      session_id: tasks.find((t) => t.task_id === root)?.session_id ?? row.session_id,
      tasks: tasks.map(({ task_id, status }) => ({ task_id, status })),
      archived_streams: archived.filter((id) => !isTask.has(id)),
    };
  }

  /**
   * Erase one task tree (the tree `taskId` belongs to): the keys of its streams (its tasks and
   * `companions` of each) are destroyed, its rows refolded, its checkpoints deleted. The session's
   * other trees read as before and the session takes new tasks; the tree takes no more events.
   */
  async eraseTree(
    taskId: string,
    companions: (taskId: string) => string[] = () => [],
  ): Promise<TreeErasureReport> {
    const tree = await this.treeOf(taskId);
    const running = tree.tasks.filter((t) => !isTerminalStatus(t.status));
    if (running.length > 0)
      throw new IllegalStateError(
        `task tree ${tree.root_task_id} has ${running.length} task(s) not finished; cancel them before erasing it`,
        { task_id: taskId, root_task_id: tree.root_task_id, unfinished: running.map((t) => t.task_id) },
      );
    const taskIds = tree.tasks.map((t) => t.task_id);
    const streams = [...new Set([...taskIds, ...taskIds.flatMap(companions), ...tree.archived_streams])];
    const counts = {
      ...(await this.countEvents({ streams }, tree.session_id)),
      archived_events: await this.countArchivedEvents({ streams }),
    };
    const erasedAt = new Date().toISOString();
    const destroyed = (await this.keys.destroyStreams(tree.session_id, streams, erasedAt)) > 0;
    const checkpoints = await this.scrub(taskIds);
    if (destroyed)
      await this.record({
        type: 'TASK_TREE_ERASED',
        payload: {
          session_id: tree.session_id,
          root_task_id: tree.root_task_id,
          task_ids: taskIds,
          erased_at: erasedAt,
        },
      });
    return {
      session_id: tree.session_id,
      root_task_id: tree.root_task_id,
      erased_at: erasedAt,
      key_destroyed: destroyed,
      task_ids: taskIds,
      streams,
      ...counts,
      checkpoints_deleted: checkpoints,
    };
  }

  /** The tasks whose TASK_RECEIVED names `root` as theirs, in the live log. */
  private async liveMembers(root: string): Promise<string[]> {
    const postgres = isPostgres(this.db);
    const rootOf = postgres
      ? sql`(payload::jsonb ->> 'root_task_id')`
      : sql`json_extract(payload, '$.root_task_id')`;
    // the partial index events_received_root (its condition literal), named on SQLite
    const from = postgres ? sql`events` : sql`events INDEXED BY events_received_root`;
    const { rows } = await sql<{ task_id: string }>`SELECT task_id FROM ${from}
      WHERE type = 'TASK_RECEIVED' AND ${rootOf} = ${root}`.execute(this.db);
    return rows.map((r) => r.task_id);
  }

  /**
   * The streams archived with the tree of `root` (its tasks and their companions): in the live
   * `archived_tasks`, and in the archive's catalog once archived long ago (a stream in both while a
   * move is under way counts once).
   */
  private async archivedMembers(root: string): Promise<string[]> {
    const live = await this.db
      .withTables<{ archived_tasks: { task_id: string; root_task_id: string } }>()
      .selectFrom('archived_tasks')
      .select('task_id')
      .where('root_task_id', '=', root)
      .execute();
    const catalogued =
      (await this.states.catalog
        .db()
        ?.selectFrom('catalog_archived_tasks')
        .select('task_id')
        .where('root_task_id', '=', root)
        .execute()) ?? [];
    return [...new Set([...live, ...catalogued].map((a) => a.task_id))];
  }

  /** The tasks' rows refolded from their (now erased) events, their checkpoints deleted; how many checkpoints. */
  private async scrub(taskIds: readonly string[]): Promise<number> {
    for (const id of taskIds) await this.refoldRow(id);
    let deleted = 0;
    for (const ids of chunks(taskIds, 500)) {
      const result = await this.db.deleteFrom('checkpoints').where('task_id', 'in', ids).executeTakeFirst();
      deleted += Number(result.numDeletedRows);
    }
    await this.keys.afterScrub();
    return deleted;
  }

  private async record(event: NewEvent): Promise<void> {
    await this.events.append(ERASURE_STREAM, [event], { expected: 'any' });
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

  /**
   * Events of the streams (or the session) in the archive's segments, as their archive records count
   * them: the live `archived_tasks` and the catalog's (a stream in both while a move is under way
   * counts once).
   */
  private async countArchivedEvents(
    of: { session_id: string } | { streams: readonly string[] },
  ): Promise<number> {
    const counts = new Map<string, number>();
    const read = async (db: Kysely<CatalogDatabase>, table: 'archived_tasks' | 'catalog_archived_tasks') => {
      const query = db.selectFrom(table as 'archived_tasks').select(['task_id', 'event_count']);
      const rows =
        'session_id' in of
          ? await query.where('session_id', '=', of.session_id).execute()
          : (
              await Promise.all(
                chunks(of.streams, 500).map((ids) => query.where('task_id', 'in', ids).execute()),
              )
            ).flat();
      for (const r of rows) counts.set(r.task_id, Number(r.event_count));
    };
    await read(this.db as unknown as Kysely<CatalogDatabase>, 'archived_tasks');
    const catalog = this.states.catalog.db();
    if (catalog) await read(catalog, 'catalog_archived_tasks');
    return [...counts.values()].reduce((a, b) => a + b, 0);
  }

  /**
   * Live events by how they are stored: sealed, or in clear with personal fields. For a tree
   * (`treeSession`), an event sealed under its session's own key counts as clear: destroying the
   * tree's stream keys does not shred it.
   */
  private async countEvents(
    of: { session_id: string } | { streams: readonly string[] },
    treeSession: string | null,
  ): Promise<{ sealed_events: number; clear_events: number }> {
    const sessionKey = treeSession === null ? null : await this.keys.sessionKeyId(treeSession);
    const events = this.db.withTables<{ events: { session_id: string; task_id: string; payload: string } }>();
    const payloads: string[] = [];
    if ('session_id' in of)
      for (const r of await events
        .selectFrom('events')
        .select('payload')
        .where('session_id', '=', of.session_id)
        .execute())
        payloads.push(r.payload);
    else
      for (const ids of chunks(of.streams, 500))
        for (const r of await events
          .selectFrom('events')
          .select('payload')
          .where('task_id', 'in', ids)
          .execute())
          payloads.push(r.payload);
    let sealed = 0;
    let clear = 0;
    for (const payload of payloads) {
      const p = JSON.parse(payload) as Record<string, unknown>;
      const sealedValue = p[SEALED_KEY];
      if (typeof sealedValue === 'string' && (sessionKey === null || keyIdOf(sealedValue) !== sessionKey))
        sealed++;
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

function checkTaskId(taskId: string): void {
  if (typeof taskId !== 'string' || taskId.length === 0 || taskId.length > MAX_ID)
    throw new ValidationError(`task_id must be a non-empty string of at most ${MAX_ID} characters`, {
      field: 'task_id',
    });
  if (isSystemSession(taskId))
    throw new ValidationError(`${taskId} is a stream of the system, not a task`, { field: 'task_id' });
}

/** SQLite: the keys leave `<db>.keys`; the WAL is checkpointed after the scrub so the rows' old pages leave it. */
export const sqliteKeyDestroyer = (store: SqliteEventStore, handle: SqliteHandle): KeyDestroyer => {
  const keys = () => {
    if (!store.dataKeys) throw new IllegalStateError('erasure needs a database file: :memory: keeps no keys');
    store.dataKeys.refresh();
    return store.dataKeys;
  };
  return {
    async destroySession(sessionId, at) {
      return keys().eraseSession(sessionId, at);
    },
    async destroyStreams(sessionId, streamIds, at) {
      return keys().eraseStreams(sessionId, streamIds, at);
    },
    async sessionKeyId(sessionId) {
      return keys().sessionKeyId(sessionId);
    },
    async afterScrub() {
      try {
        handle.raw.pragma('wal_checkpoint(TRUNCATE)');
      } catch {
        // a reader holds the WAL: the next checkpoint copies the scrubbed pages
      }
    },
  };
};

/**
 * PostgreSQL: under the append lock (no append commits with a key it read before the erasure), then
 * VACUUM FULL rewrites the small tables so the destroyed keys' old row versions leave their files.
 */
export const pgKeyDestroyer = (handle: PostgresHandle): KeyDestroyer => {
  const underAppendLock = async <T>(work: (client: Queryable) => Promise<T>, tables: string): Promise<T> => {
    const client = await handle.pool.connect();
    let result: T;
    try {
      await client.query(`BEGIN; ${APPEND_LOCK_SQL}`);
      result = await work(client);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
    await handle.pool.query(`VACUUM FULL ${tables}`);
    return result;
  };
  return {
    destroySession: (sessionId, at) =>
      underAppendLock((c) => eraseSessionKeys(c, sessionId, at), 'data_keys, stream_keys'),
    destroyStreams: (sessionId, streamIds, at) =>
      underAppendLock((c) => eraseStreamKeys(c, sessionId, streamIds, at), 'stream_keys'),
    async sessionKeyId(sessionId) {
      const { rows } = await handle.pool.query<{ key_id: string | null }>(
        'SELECT key_id FROM data_keys WHERE session_id = $1',
        [sessionId],
      );
      return rows[0]?.key_id ?? null;
    },
    async afterScrub() {
      // the tasks rows' old versions go with autovacuum; VACUUM FULL of tasks would lock every task read
    },
  };
};
