import { performance } from 'node:perf_hooks';
import { EventPayload } from '@runledger/contracts';
import { sql } from 'kysely';
import { Db, chunks, isPostgres } from './archive-planner';

/** What the archiver lends the cataloguer: its write transaction and its record in `system:archive`. */
export interface ArchiveWrites {
  inWriteTransaction(conn: Db, body: (trx: Db) => Promise<void>): Promise<void>;
  record(trx: Db, type: 'TASKS_CATALOGUED', payload: EventPayload<'TASKS_CATALOGUED'>): Promise<void>;
}

/** One batch moved into the catalog. */
export interface CataloguedBatch {
  segment_ids: string[];
  /** records moved: archived tasks and their companion streams */
  tasks: number;
  /** how long its live write transaction held the writer, ms */
  write_ms: number;
}

const deleteIn = (trx: Db, table: string, ids: readonly string[]) =>
  sql`DELETE FROM ${sql.table(table)} WHERE task_id IN (${sql.join(ids)})`.execute(trx);

/** The pairs of tables a move copies from (live) and into (the catalog). */
const TABLES = [
  { live: 'tasks', catalog: 'catalog_tasks' },
  { live: 'archived_tasks', catalog: 'catalog_archived_tasks' },
] as const;

/**
 * The second tier of retention: archived tasks' records (their `tasks` summary row and their
 * `archived_tasks` row) move out of the live database into the archive's catalog once they were
 * archived long enough ago, so the live database stops growing with the history.
 *
 * On SQLite the catalog is another file, so a move cannot be one transaction. A batch first copies
 * the records into the catalog and commits there (synced); then one live write transaction deletes
 * the live records the catalog now holds and appends TASKS_CATALOGUED. A crash between the two leaves
 * the records in both places: readers take the live one (they dedupe by task id), and the next run
 * finds the records still due and finishes the move (the copy replaces what it copied before). On
 * PostgreSQL the catalog's tables sit in the same database; the same two steps run there.
 */
export class Cataloguer {
  constructor(
    private readonly conn: Db,
    private readonly writes: ArchiveWrites,
    private readonly batchTasks: number,
  ) {}

  /**
   * The records of tasks archived at or before `archivedBefore` (ISO time), batch after batch.
   * `pause` runs between two batches; `stopped` ends the run between batches.
   */
  async run(
    archivedBefore: string,
    options: {
      maxBatches?: number;
      pause?: (previous: CataloguedBatch) => Promise<void>;
      stopped?: () => boolean;
    } = {},
  ): Promise<CataloguedBatch[]> {
    const done: CataloguedBatch[] = [];
    const columns = await this.syncColumns();
    for (let batch = 0; batch < (options.maxBatches ?? Infinity) && !options.stopped?.(); batch++) {
      const due = await this.conn
        .selectFrom('archived_tasks')
        .select('task_id')
        .where('archived_at', '<=', archivedBefore)
        .orderBy('archived_at')
        .orderBy('task_id')
        .limit(this.batchTasks)
        .execute();
      if (due.length === 0) break;
      const previous = done.at(-1);
      if (previous && options.pause) {
        await options.pause(previous);
        if (options.stopped?.()) break;
      }
      const moved = await this.move(
        due.map((r) => r.task_id),
        columns,
        archivedBefore,
      );
      // nothing moved: the due records went meanwhile (another run moved them, or a restore)
      if (!moved) break;
      done.push(moved);
    }
    return done;
  }

  /** Copy into the catalog (committed), then delete from the live tables what the catalog holds. */
  private async move(
    ids: readonly string[],
    columns: Record<string, string[]>,
    archivedBefore: string,
  ): Promise<CataloguedBatch | null> {
    await this.inCatalogTransaction(async (trx) => {
      for (const part of chunks(ids, 500))
        for (const { live, catalog } of TABLES) {
          const cols = sql.join(columns[live].map((c) => sql.ref(c)));
          await deleteIn(trx, catalog, part);
          await sql`INSERT INTO ${sql.table(catalog)} (${cols}) SELECT ${cols} FROM ${sql.table(live)} WHERE task_id IN (${sql.join(part)})`.execute(
            trx,
          );
        }
    });
    let batch: CataloguedBatch | null = null;
    const started = performance.now();
    await this.writes.inWriteTransaction(this.conn, async (trx) => {
      const moved: { task_id: string; segment_id: string }[] = [];
      for (const part of chunks(ids, 500))
        moved.push(
          ...(await trx
            .selectFrom('archived_tasks as a')
            .select(['a.task_id', 'a.segment_id'])
            .where('a.task_id', 'in', part)
            .where(sql<boolean>`EXISTS (SELECT 1 FROM catalog_archived_tasks c WHERE c.task_id = a.task_id)`)
            .execute()),
        );
      if (moved.length === 0) return;
      for (const part of chunks(
        moved.map((m) => m.task_id),
        500,
      ))
        for (const { live } of TABLES) await deleteIn(trx, live, part);
      const segmentIds = [...new Set(moved.map((m) => m.segment_id))].sort();
      await this.writes.record(trx, 'TASKS_CATALOGUED', {
        segment_ids: segmentIds,
        tasks: moved.length,
        archived_before: archivedBefore,
      });
      batch = { segment_ids: segmentIds, tasks: moved.length, write_ms: 0 };
    });
    if (batch) (batch as CataloguedBatch).write_ms = performance.now() - started;
    // a task restored while its records were being copied: the catalog's copy is stale, and goes
    await this.dropRestored(ids);
    return batch;
  }

  /**
   * The catalog's copies of these tasks whose events are live again (restored meanwhile). A copy whose
   * task has neither live events nor a live record stays: another run moved it.
   */
  async dropRestored(ids: readonly string[]): Promise<void> {
    const restored: string[] = [];
    for (const part of chunks(ids, 500))
      restored.push(
        ...(
          await this.conn
            .selectFrom('events')
            .select('task_id')
            .distinct()
            .where('task_id', 'in', part)
            .execute()
        ).map((r) => r.task_id),
      );
    if (restored.length > 0) await this.dropFromCatalog(restored);
  }

  /** Remove these tasks' records from the catalog (their live records, when any, are the truth). */
  async dropFromCatalog(ids: readonly string[]): Promise<void> {
    await this.inCatalogTransaction(async (trx) => {
      for (const part of chunks(ids, 500))
        for (const { catalog } of TABLES) await deleteIn(trx, catalog, part);
    });
  }

  /**
   * Bring catalogued records back into the live tables (a restore starts so): the catalog's rows of
   * `ids`, where the live tables have none, in one live write transaction; the catalog's copies go
   * afterwards (until then readers take the live ones).
   */
  async uncatalogue(ids: readonly string[]): Promise<void> {
    const columns = await this.syncColumns();
    await this.writes.inWriteTransaction(this.conn, async (trx) => {
      for (const part of chunks(ids, 500))
        for (const { live, catalog } of TABLES) {
          const cols = sql.join(columns[live].map((c) => sql.ref(c)));
          await sql`INSERT INTO ${sql.table(live)} (${cols}) SELECT ${cols} FROM ${sql.table(catalog)} c WHERE task_id IN (${sql.join(part)}) AND NOT EXISTS (SELECT 1 FROM ${sql.table(live)} l WHERE l.task_id = c.task_id)`.execute(
            trx,
          );
        }
    });
    await this.dropFromCatalog(ids);
  }

  /**
   * The live tables' columns, after adding to the catalog's tables any column they lack (the live
   * tables gained it in a migration after the catalog was made).
   */
  private async syncColumns(): Promise<Record<string, string[]>> {
    const out: Record<string, string[]> = {};
    for (const { live, catalog } of TABLES) {
      const liveColumns = await this.columnsOf(live, 'main');
      const have = new Set((await this.columnsOf(catalog, 'catalog')).map((c) => c.name));
      for (const c of liveColumns)
        if (!have.has(c.name))
          await sql`ALTER TABLE ${sql.table(isPostgres(this.conn) ? catalog : `catalog.${catalog}`)} ADD COLUMN ${sql.ref(c.name)} ${sql.raw(c.type || 'text')}`.execute(
            this.conn,
          );
      out[live] = liveColumns.map((c) => c.name);
    }
    return out;
  }

  private async columnsOf(
    table: string,
    sqliteSchema: 'main' | 'catalog',
  ): Promise<{ name: string; type: string }[]> {
    if (isPostgres(this.conn))
      return (
        await sql<{ name: string; type: string }>`SELECT column_name AS name, data_type AS type
          FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ${table}
          ORDER BY ordinal_position`.execute(this.conn)
      ).rows;
    return (
      await sql<{
        name: string;
        type: string;
      }>`SELECT name, type FROM pragma_table_info(${table}, ${sqliteSchema})`.execute(this.conn)
    ).rows;
  }

  /**
   * A transaction that writes the catalog only: on SQLite the attached file, whose commits are synced,
   * so what it copied is durable before the live records go.
   */
  private async inCatalogTransaction(body: (trx: Db) => Promise<void>): Promise<void> {
    const postgres = isPostgres(this.conn);
    if (!postgres) await sql.raw('PRAGMA catalog.synchronous = FULL').execute(this.conn);
    await sql.raw('BEGIN').execute(this.conn);
    try {
      await body(this.conn);
      await sql`COMMIT`.execute(this.conn);
    } catch (err) {
      await sql`ROLLBACK`.execute(this.conn).catch(() => undefined);
      throw err;
    }
  }
}
