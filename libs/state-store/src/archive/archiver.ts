import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  EventPayload,
  IllegalStateError,
  NewEvent,
  NotFoundError,
  TERMINAL_STATUSES,
  isFinalEventType,
} from '@runledger/contracts';
import {
  APPEND_LOCK_SQL,
  EVENTS_CHANNEL,
  EVENT_INSERT_COLUMNS,
  NEXT_EVENT_POSITION,
  EventRow,
  SegmentContent,
  SegmentTask,
  buildEnvelopes,
  decodeSegment,
  encodeSegment,
  eventRowValues,
  readSegmentFile,
  removeSegmentFile,
  segmentFile,
  validateBatch,
  writeSegmentFile,
} from '@runledger/event-store';
import { sql } from 'kysely';
import {
  ArchivePlan,
  ArchivePlanner,
  Db,
  PlannedTree,
  ScanState,
  SkippedTree,
  chunks,
  isPostgres,
} from './archive-planner';
import { Cataloguer } from './cataloguer';
import { RetentionPolicy } from './retention-policy';

export type { ArchivePlan, PlannedTree, SkippedTree } from './archive-planner';

/** The stream the archive records what it moved in (TASKS_ARCHIVED, TASKS_RESTORED). */
export const ARCHIVE_STREAM = 'system:archive';

export interface ArchiverOptions {
  /**
   * SQLite: the folder segments are written to (beside the database). null on PostgreSQL: segments are
   * rows of `archive_segments`, written in the transaction that moves their events.
   */
  folder: string | null;
  /** tasks (with their children) per segment at most: what one write transaction moves; default 200 */
  batchTasks?: number;
  /** streams that belong to a task besides its own (its outbound deliveries): moved and restored with it */
  companionStreams?: (taskId: string) => string[];
  /**
   * prefixes of receipt streams, which belong to no task (inbound hook deliveries, `hook:`): each
   * moves on its own once older than the policy's longest age (see ArchivePlanner.planReceipts)
   */
  receiptStreamPrefixes?: readonly string[];
  /** a segment file no record names is removed once this old (a crashed run's); default 10 minutes */
  orphanAgeMs?: number;
  /**
   * SQLite: runs a statement to its end on the archiver's connection. `PRAGMA incremental_vacuum(N)`
   * frees one page per step, and a prepared statement's run() steps once: exec steps it through.
   */
  exec?: (statement: string) => void;
}

export interface ArchivedSegment {
  segment_id: string;
  task_ids: string[];
  events: number;
  bytes: number;
  sha256: string;
  /** how long its write transaction held the writer, ms */
  write_ms: number;
}

/** What a sweeper's rest after a batch measures: how long the batch held the writer. */
export type BatchDone = Pick<ArchivedSegment, 'write_ms'>;

export interface ArchiveRun {
  dry_run: boolean;
  segments: ArchivedSegment[];
  /** what would move (dry run) or moved */
  tasks: string[];
  /** receipt streams (of no task) that would move or moved */
  receipts: number;
  events: number;
  bytes: number;
  skipped: SkippedTree[];
  /** another instance holds the archive lease (PostgreSQL): this run did nothing */
  busy: boolean;
  /**
   * the second tier (RetentionPolicy.catalog_after_ms): records of tasks archived long enough ago that
   * moved (dry run: would move) out of the live database into the archive's catalog
   */
  catalogued: { tasks: number; segment_ids: string[] };
}

export interface RestoreResult {
  segment_id: string;
  task_ids: string[];
  events: number;
}

export interface VacuumResult {
  /** SQLite: incremental (pages freed in place) or full (the file rewritten once to turn incremental on); PostgreSQL: vacuum */
  mode: 'incremental' | 'full' | 'vacuum';
  bytes_before: number;
  bytes_after: number;
}

/** The advisory lock one archiving instance holds on PostgreSQL for a whole run. */
const ARCHIVE_LEASE_KEY = sql`hashtext('runledger.archive:' || current_schema())`;

class ArchiveConflict extends Error {}

/** archiveTrees' answer when its caller stopped it before the write: nothing moved, no file left */
const STOPPED = Symbol('stopped');

/** What runs archive batches for a sweeper: an Archiver here, or one in a thread of its own. */
export interface ArchiveRunner {
  /**
   * whether a batch runs on the caller's event loop (SQLite through better-sqlite3 is synchronous):
   * the sweeper then rests against the whole batch; otherwise against the time it held the writer
   */
  readonly holdsEventLoop: boolean;
  run(policy: RetentionPolicy, now: number, options?: Parameters<Archiver['run']>[2]): Promise<ArchiveRun>;
  reclaim(pages?: number): Promise<number>;
}

/**
 * Moves finished task trees out of the live `events` table into checksummed segments and back.
 *
 * One batch: its streams are read, the segment is built and (SQLite) written to its file atomically;
 * then one write transaction checks that nothing moved meanwhile, records the segment and its tasks,
 * deletes their checkpoints and events (the triggers let an event go only once its task's archive
 * record exists) and appends TASKS_ARCHIVED. A crash before the commit leaves the log as it was (and
 * at most a file no record names, removed by a later run); after it, the segment is recorded. Nothing
 * is lost, nothing is in both places.
 */
export class Archiver implements ArchiveRunner {
  /** its batches run on the caller's thread (better-sqlite3 is synchronous; gzip and fsync are too) */
  readonly holdsEventLoop = true;
  private readonly orphanAgeMs: number;
  private readonly planner: ArchivePlanner;

  constructor(
    private readonly db: Db,
    private readonly options: ArchiverOptions,
  ) {
    this.orphanAgeMs = options.orphanAgeMs ?? 600_000;
    this.planner = new ArchivePlanner(db, {
      batchTasks: options.batchTasks ?? 200,
      companionStreams: options.companionStreams ?? (() => []),
      receiptStreamPrefixes: options.receiptStreamPrefixes,
    });
  }

  /**
   * Apply the policy once, batch after batch, until nothing more is due or `maxBatches` ran. On
   * PostgreSQL the run holds the archive lease: a second instance's run finds it taken and does nothing.
   */
  async run(
    policy: RetentionPolicy,
    now: number,
    options: {
      dryRun?: boolean;
      maxBatches?: number;
      reason?: 'policy' | 'older_than';
      /**
       * a rest between two batches' write transactions: after a batch's segment is prepared (read,
       * encoded, its file written) and before its transaction, so the preparing overlaps the rest.
       * `previous`: what the batch before moved (null when something moved meanwhile)
       */
      pause?: (previous: BatchDone | null) => Promise<void>;
      /** asked before each batch, and after each pause: true ends the run there (a sweeper stopping) */
      stopped?: () => boolean;
    } = {},
  ): Promise<ArchiveRun> {
    const result: ArchiveRun = {
      dry_run: options.dryRun ?? false,
      segments: [],
      tasks: [],
      receipts: 0,
      events: 0,
      bytes: 0,
      skipped: [],
      busy: false,
      catalogued: { tasks: 0, segment_ids: [] },
    };
    return this.db.connection().execute(async (conn) => {
      if (isPostgres(this.db)) {
        const { rows } = await sql<{
          ok: boolean;
        }>`SELECT pg_try_advisory_lock(${ARCHIVE_LEASE_KEY}) AS ok`.execute(conn);
        if (!rows[0].ok) return { ...result, busy: true };
      }
      try {
        if (!result.dry_run) this.removeOrphanFiles(await this.recordedSegments(conn));
        const done = new Set<string>();
        /** what the batch before moved; undefined before the first */
        let previous: ArchivedSegment | null | undefined;
        /** where the scan of finished tasks goes on: each is looked at once per run */
        let scanFrom: ScanState | null = null;
        /** finished task trees first, then receipt streams; null once both ran out */
        let phase: 'tasks' | 'receipts' | null = 'tasks';
        let receiptsFrom: string | null = null;
        for (let batch = 0; batch < (options.maxBatches ?? Infinity) && !options.stopped?.(); batch++) {
          let trees: PlannedTree[] = [];
          if (phase === 'tasks') {
            const plan = await this.plan(conn, policy, now, done, scanFrom);
            scanFrom = plan.resume;
            for (const s of plan.skipped)
              if (!result.skipped.some((k) => k.task_id === s.task_id)) result.skipped.push(s);
            trees = plan.trees;
            if (trees.length === 0) phase = 'receipts';
          }
          if (phase === 'receipts') {
            const plan = await this.planner.planReceipts(conn, policy, now, receiptsFrom);
            receiptsFrom = plan.resume;
            trees = plan.trees;
            if (trees.length === 0) phase = null;
          }
          if (phase === null) break;
          for (const t of trees) for (const id of t.task_ids) done.add(id);
          const receipts = trees.filter((t) => t.task_ids.length === 0).length;
          if (result.dry_run) {
            result.tasks.push(...trees.flatMap((t) => t.task_ids));
            result.receipts += receipts;
            result.events += await this.planner.countEvents(
              conn,
              trees.flatMap((t) => t.streams),
            );
            continue;
          }
          const pause = options.pause;
          const rest =
            pause && previous !== undefined
              ? async () => {
                  await pause(previous!);
                  return !options.stopped?.();
                }
              : undefined;
          const segment = await this.archiveTrees(conn, trees, options.reason ?? 'policy', rest, now);
          if (segment === STOPPED) break;
          if (segment) {
            result.segments.push(segment);
            result.tasks.push(...segment.task_ids);
            result.receipts += receipts;
            result.events += segment.events;
            result.bytes += segment.bytes;
          }
          previous = segment;
        }
        if (policy.catalog_after_ms !== undefined && !options.stopped?.())
          result.catalogued = await this.catalogue(
            conn,
            new Date(now - policy.catalog_after_ms).toISOString(),
            {
              dryRun: result.dry_run,
              pause: options.pause,
              stopped: options.stopped,
            },
          );
        return result;
      } finally {
        if (isPostgres(this.db)) await sql`SELECT pg_advisory_unlock(${ARCHIVE_LEASE_KEY})`.execute(conn);
      }
    });
  }

  /**
   * The second tier: move the records of tasks archived at or before `archivedBefore` into the
   * archive's catalog (see Cataloguer); a dry run counts them.
   */
  private async catalogue(
    conn: Db,
    archivedBefore: string,
    options: {
      dryRun: boolean;
      pause?: (previous: BatchDone | null) => Promise<void>;
      stopped?: () => boolean;
    },
  ): Promise<ArchiveRun['catalogued']> {
    if (options.dryRun) {
      const due = await conn
        .selectFrom('archived_tasks')
        .select([(eb) => eb.fn.countAll<number>().as('n')])
        .where('archived_at', '<=', archivedBefore)
        .executeTakeFirst();
      return { tasks: Number(due?.n ?? 0), segment_ids: [] };
    }
    const batches = await this.cataloguer(conn).run(archivedBefore, {
      pause: options.pause,
      stopped: options.stopped,
    });
    return {
      tasks: batches.reduce((n, b) => n + b.tasks, 0),
      segment_ids: [...new Set(batches.flatMap((b) => b.segment_ids))],
    };
  }

  private cataloguer(conn: Db): Cataloguer {
    return new Cataloguer(
      conn,
      {
        inWriteTransaction: (c, body) => this.inWriteTransaction(c, body),
        record: (trx, type, payload) => this.record(trx, type, payload),
      },
      this.options.batchTasks ?? 200,
    );
  }

  /** The next batch of trees the policy lets go: see ArchivePlanner.plan. */
  plan(
    conn: Db,
    policy: RetentionPolicy,
    now: number,
    exclude: ReadonlySet<string> = new Set(),
    from: ScanState | null = null,
  ): Promise<ArchivePlan> {
    return this.planner.plan(conn, policy, now, exclude, from);
  }

  /**
   * One segment of the given trees; null when something moved meanwhile (nothing is archived then).
   * `beforeWrite`, once the segment is prepared: false abandons it (STOPPED; its file removed).
   */
  async archiveTrees(
    conn: Db,
    trees: readonly PlannedTree[],
    reason: 'policy' | 'older_than',
    beforeWrite?: () => Promise<boolean>,
    /** the run's time: the segment's and its tasks' archive time (a catalog cut compares with it) */
    at = Date.now(),
  ): Promise<ArchivedSegment | null | typeof STOPPED> {
    const streams = trees.flatMap((t) => t.streams);
    const taskIds = trees.flatMap((t) => t.task_ids);
    const rootOf = new Map<string, PlannedTree>();
    for (const t of trees) for (const s of t.streams) rootOf.set(s, t);
    const events: EventRow[] = [];
    for (const ids of chunks(streams, 500))
      events.push(...(await conn.selectFrom('events').selectAll().where('task_id', 'in', ids).execute()));
    events.sort((a, b) => a.position - b.position);
    if (events.length === 0) return null;
    const checkpoints: Record<string, unknown>[] = [];
    for (const ids of chunks(taskIds, 500))
      checkpoints.push(
        ...(await conn.selectFrom('checkpoints').selectAll().where('task_id', 'in', ids).execute()),
      );
    let tasks: SegmentTask[];
    try {
      tasks = segmentTasks(events, rootOf);
    } catch (err) {
      if (err instanceof ArchiveConflict) return null;
      throw err;
    }
    const segmentId = `seg_${events[0].position}_${randomBytes(6).toString('hex')}`;
    const content: SegmentContent = {
      segment_id: segmentId,
      created_at: new Date(at).toISOString(),
      tasks,
      events,
      checkpoints,
    };
    const encoded = encodeSegment(content);
    const file = this.options.folder ? segmentFile(this.options.folder, segmentId) : null;
    if (file) {
      mkdirSync(this.options.folder!, { recursive: true });
      writeSegmentFile(file, encoded.bytes);
    }
    if (beforeWrite && !(await beforeWrite())) {
      if (file) removeSegmentFile(file);
      return STOPPED;
    }
    const writeStarted = performance.now();
    try {
      await this.inWriteTransaction(conn, async (trx) => {
        await this.checkUnmoved(trx, tasks, taskIds);
        await trx
          .insertInto('archive_segments')
          .values({
            segment_id: segmentId,
            sha256: encoded.sha256,
            bytes: encoded.bytes.length,
            task_count: tasks.length,
            event_count: events.length,
            first_position: events[0].position,
            last_position: events[events.length - 1].position,
            created_at: content.created_at,
            content: file ? null : encoded.bytes,
          })
          .execute();
        for (const part of chunks(tasks, 100))
          await trx
            .insertInto('archived_tasks')
            .values(part.map((t) => ({ ...t, segment_id: segmentId, archived_at: content.created_at })))
            .execute();
        for (const ids of chunks(taskIds, 500))
          await trx.deleteFrom('checkpoints').where('task_id', 'in', ids).execute();
        let deleted = 0;
        for (const ids of chunks(streams, 500))
          deleted += Number(
            (await trx.deleteFrom('events').where('task_id', 'in', ids).executeTakeFirst()).numDeletedRows,
          );
        if (deleted !== events.length)
          throw new ArchiveConflict(`deleted ${deleted} events, read ${events.length}`);
        await this.record(trx, 'TASKS_ARCHIVED', {
          segment_id: segmentId,
          task_ids: taskIds,
          companion_streams: streams.filter((s) => !taskIds.includes(s)),
          events: events.length,
          bytes: encoded.bytes.length,
          sha256: encoded.sha256,
          reason,
        });
      });
    } catch (err) {
      if (file) removeSegmentFile(file);
      if (err instanceof ArchiveConflict) return null;
      throw err;
    }
    return {
      segment_id: segmentId,
      task_ids: taskIds,
      events: events.length,
      bytes: encoded.bytes.length,
      sha256: encoded.sha256,
      write_ms: performance.now() - writeStarted,
    };
  }

  /** Inside the transaction: every stream still holds what the segment holds, and its tasks ended. */
  private async checkUnmoved(
    trx: Db,
    tasks: readonly SegmentTask[],
    taskIds: readonly string[],
  ): Promise<void> {
    const streams = tasks.map((t) => t.task_id);
    for (const ids of chunks(streams, 500)) {
      const archived = await trx
        .selectFrom('archived_tasks')
        .select('task_id')
        .where('task_id', 'in', ids)
        .executeTakeFirst();
      if (archived) throw new ArchiveConflict(`${archived.task_id} was archived meanwhile`);
      const live = await trx
        .selectFrom('events')
        .select(['task_id', (eb) => eb.fn.countAll<number>().as('n'), (eb) => eb.fn.max('sequence').as('v')])
        .where('task_id', 'in', ids)
        .groupBy('task_id')
        .execute();
      const byId = new Map(live.map((r) => [r.task_id, r]));
      for (const t of tasks.filter((x) => ids.includes(x.task_id))) {
        const r = byId.get(t.task_id);
        if (!r || Number(r.n) !== t.event_count || Number(r.v) !== t.last_sequence)
          throw new ArchiveConflict(`${t.task_id} moved meanwhile`);
      }
    }
    for (const ids of chunks(taskIds, 500)) {
      const open = await trx
        .selectFrom('tasks')
        .select('task_id')
        .where('task_id', 'in', ids)
        .where('status', 'not in', [...TERMINAL_STATUSES])
        .executeTakeFirst();
      if (open) throw new ArchiveConflict(`${open.task_id} is not finished`);
    }
  }

  /**
   * Bring archived tasks back into the live log: the whole tree `id` belongs to (a task id), or every
   * task of a segment (a segment id). Their events return at their own positions, their checkpoints
   * with them; appends to them are accepted again.
   */
  async restore(id: string): Promise<RestoreResult> {
    return this.db.connection().execute(async (conn) => {
      // records moved on into the catalog come back into the live tables first
      const catalogued = await this.cataloguedRecords(conn, id);
      if (catalogued.length > 0) await this.cataloguer(conn).uncatalogue(catalogued);
      let rows = await conn.selectFrom('archived_tasks').selectAll().where('segment_id', '=', id).execute();
      if (rows.length === 0) {
        const task = await conn
          .selectFrom('archived_tasks')
          .selectAll()
          .where('task_id', '=', id)
          .executeTakeFirst();
        if (!task) {
          const live = await conn
            .selectFrom('events')
            .select('task_id')
            .where('task_id', '=', id)
            .executeTakeFirst();
          if (live) throw new IllegalStateError(`${id} is in the live log, not archived`, { task_id: id });
          throw new NotFoundError(`no archived task or segment ${id}`, { id });
        }
        rows = await conn
          .selectFrom('archived_tasks')
          .selectAll()
          .where('segment_id', '=', task.segment_id)
          .where('root_task_id', '=', task.root_task_id)
          .execute();
      }
      const segmentId = rows[0].segment_id;
      const content = decodeSegment(
        await this.segmentBytes(conn, segmentId),
        await this.sha256Of(conn, segmentId),
        segmentId,
      );
      const streams = new Set(rows.map((r) => r.task_id));
      const events = content.events.filter((e) => streams.has(e.task_id));
      const checkpoints = content.checkpoints.filter((c) => streams.has(String(c.task_id)));
      const taskIds = rows
        .filter((r) => content.tasks.some((t) => t.task_id === r.task_id))
        .map((r) => r.task_id);
      let segmentGone = false;
      // a copy a move into the catalog left (it stopped before deleting the live records) goes first
      await this.cataloguer(conn).dropFromCatalog([...streams]);
      // durable before the segment's file goes (see openSqliteArchiver)
      await this.synchronousFull(conn, () =>
        this.inWriteTransaction(conn, async (trx) => {
          let unarchived = 0;
          for (const ids of chunks([...streams], 500))
            unarchived += Number(
              (await trx.deleteFrom('archived_tasks').where('task_id', 'in', ids).executeTakeFirst())
                .numDeletedRows,
            );
          if (unarchived !== streams.size)
            throw new IllegalStateError(`${id} moved meanwhile; run the restore again`, { id });
          const postgres = isPostgres(this.db);
          for (const part of chunks(events, 200)) {
            const values = part.map(
              (e) =>
                sql`(${sql.join([
                  e.position,
                  e.event_id,
                  e.task_id,
                  e.session_id,
                  e.sequence,
                  e.type,
                  e.payload,
                  e.causation_id,
                  e.correlation_id,
                  e.created_at,
                  e.schema_version,
                ])})`,
            );
            await sql`INSERT INTO events (position, ${sql.raw(EVENT_INSERT_COLUMNS)}) ${sql.raw(
              postgres ? 'OVERRIDING SYSTEM VALUE ' : '',
            )}VALUES ${sql.join(values)}`.execute(trx);
          }
          for (const part of chunks(checkpoints, 100))
            await trx
              .insertInto('checkpoints')
              .values(part as never)
              .execute();
          const left =
            (await trx
              .selectFrom('archived_tasks')
              .select('task_id')
              .where('segment_id', '=', segmentId)
              .executeTakeFirst()) ??
            // tasks of the segment that moved on into the catalog still read from it
            (
              await sql`SELECT task_id FROM catalog_archived_tasks WHERE segment_id = ${segmentId} LIMIT 1`.execute(
                trx,
              )
            ).rows[0];
          if (!left) {
            await trx.deleteFrom('archive_segments').where('segment_id', '=', segmentId).execute();
            segmentGone = true;
          }
          await this.record(trx, 'TASKS_RESTORED', {
            segment_id: segmentId,
            task_ids: taskIds,
            events: events.length,
          });
        }),
      );
      if (segmentGone && this.options.folder) removeSegmentFile(segmentFile(this.options.folder, segmentId));
      return { segment_id: segmentId, task_ids: taskIds, events: events.length };
    });
  }

  /**
   * The catalog's records `id` names for a restore: a segment's, or the tree of a task in its
   * segment (as a restore of an archived task brings back its tree).
   */
  private async cataloguedRecords(conn: Db, id: string): Promise<string[]> {
    const bySegment = await sql<{
      task_id: string;
    }>`SELECT task_id FROM catalog_archived_tasks WHERE segment_id = ${id}`.execute(conn);
    if (bySegment.rows.length > 0) return bySegment.rows.map((r) => r.task_id);
    const tree = await sql<{ task_id: string }>`SELECT t.task_id FROM catalog_archived_tasks c
      JOIN catalog_archived_tasks t ON t.segment_id = c.segment_id AND t.root_task_id = c.root_task_id
      WHERE c.task_id = ${id}`.execute(conn);
    return tree.rows.map((r) => r.task_id);
  }

  /** SQLite: `body` with every commit synced (synchronous FULL), the connection's own setting after it. */
  private async synchronousFull<T>(conn: Db, body: () => Promise<T>): Promise<T> {
    if (isPostgres(this.db)) return body();
    const level = Object.values(
      (await sql.raw('PRAGMA synchronous').execute(conn)).rows[0] as object,
    )[0] as number;
    await sql.raw('PRAGMA synchronous = FULL').execute(conn);
    try {
      return await body();
    } finally {
      await sql.raw(`PRAGMA synchronous = ${Math.trunc(level)}`).execute(conn);
    }
  }

  /** Give back the space archiving freed: see VacuumResult. */
  async vacuum(): Promise<VacuumResult> {
    if (isPostgres(this.db)) {
      const size = async () =>
        Number(
          (
            await sql<{
              n: string;
            }>`SELECT pg_total_relation_size('events') + pg_total_relation_size('checkpoints') AS n`.execute(
              this.db,
            )
          ).rows[0].n,
        );
      const before = await size();
      await sql`VACUUM (ANALYZE) events, checkpoints, tasks, archived_tasks, archive_segments`.execute(
        this.db,
      );
      return { mode: 'vacuum', bytes_before: before, bytes_after: await size() };
    }
    return this.db.connection().execute(async (conn) => {
      const pragma = async (name: string) =>
        Number(Object.values((await sql.raw(`PRAGMA ${name}`).execute(conn)).rows[0] as object)[0]);
      const size = async () => (await pragma('page_count')) * (await pragma('page_size'));
      const before = await size();
      let mode: VacuumResult['mode'] = 'incremental';
      if ((await pragma('auto_vacuum')) !== 2) {
        await sql`PRAGMA auto_vacuum = INCREMENTAL`.execute(conn);
        await sql`VACUUM`.execute(conn);
        mode = 'full';
      } else {
        this.incrementalVacuum(null);
      }
      await sql`PRAGMA wal_checkpoint(TRUNCATE)`.execute(conn);
      return { mode, bytes_before: before, bytes_after: await size() };
    });
  }

  /**
   * SQLite with auto_vacuum=INCREMENTAL: hand back up to `pages` free pages (bounded, so it holds the
   * writer briefly). The free pages left after it (0: nothing more to give back, or not SQLite).
   */
  async reclaim(pages = 2000): Promise<number> {
    if (isPostgres(this.db)) return 0;
    return this.db.connection().execute(async (conn) => {
      const pragma = async (text: string) =>
        Number(Object.values((await sql.raw(`PRAGMA ${text}`).execute(conn)).rows[0] ?? { n: 0 })[0]);
      if ((await pragma('auto_vacuum')) !== 2) return 0;
      this.incrementalVacuum(pages);
      return pragma('freelist_count');
    });
  }

  /** SQLite: give back `pages` free pages to the file (null: all of them). */
  private incrementalVacuum(pages: number | null): void {
    if (!this.options.exec)
      throw new Error('incremental vacuum needs the SQLite connection (ArchiverOptions.exec)');
    this.options.exec(
      pages === null ? 'PRAGMA incremental_vacuum' : `PRAGMA incremental_vacuum(${Math.trunc(pages)})`,
    );
  }

  private async recordedSegments(conn: Db): Promise<Set<string>> {
    return new Set(
      (await conn.selectFrom('archive_segments').select('segment_id').execute()).map((r) => r.segment_id),
    );
  }

  /** Files a crashed run left: a segment no record names, or a partial write, once old enough to be nobody's in flight. */
  removeOrphanFiles(recorded: ReadonlySet<string>): string[] {
    const folder = this.options.folder;
    if (!folder || !existsSync(folder)) return [];
    const removed: string[] = [];
    const old = Date.now() - this.orphanAgeMs;
    for (const name of readdirSync(folder)) {
      const path = join(folder, name);
      const id = name.replace(/\.jsonl\.gz(\.partial)?$/, '');
      if (id === name || (recorded.has(id) && !name.endsWith('.partial'))) continue;
      if (statSync(path).mtimeMs > old) continue;
      removeSegmentFile(path.replace(/\.partial$/, ''));
      removed.push(name);
    }
    return removed;
  }

  private async segmentBytes(conn: Db, segmentId: string): Promise<Buffer> {
    if (this.options.folder) return readSegmentFile(segmentFile(this.options.folder, segmentId));
    const row = await conn
      .selectFrom('archive_segments')
      .select('content')
      .where('segment_id', '=', segmentId)
      .executeTakeFirst();
    if (!row?.content)
      throw new NotFoundError(`archive segment ${segmentId} holds no content`, { segment_id: segmentId });
    return row.content;
  }

  private async sha256Of(conn: Db, segmentId: string): Promise<string> {
    const row = await conn
      .selectFrom('archive_segments')
      .select('sha256')
      .where('segment_id', '=', segmentId)
      .executeTakeFirst();
    if (!row)
      throw new NotFoundError(`archive segment ${segmentId} is not recorded`, { segment_id: segmentId });
    return row.sha256;
  }

  /**
   * One transaction holding the writer: BEGIN IMMEDIATE on SQLite (appends of other connections wait
   * out its few statements), the append lock on PostgreSQL (appends queue behind it, as behind each other).
   */
  private async inWriteTransaction(conn: Db, body: (trx: Db) => Promise<void>): Promise<void> {
    const postgres = isPostgres(this.db);
    await sql.raw(postgres ? 'BEGIN' : 'BEGIN IMMEDIATE').execute(conn);
    try {
      if (postgres) await sql.raw(APPEND_LOCK_SQL).execute(conn);
      await body(conn);
      if (postgres) await sql.raw(`SELECT pg_notify('${EVENTS_CHANNEL}', '')`).execute(conn);
      await sql`COMMIT`.execute(conn);
    } catch (err) {
      await sql`ROLLBACK`.execute(conn).catch(() => undefined);
      throw err;
    }
  }

  /** The archive's own record, appended to ARCHIVE_STREAM inside the transaction that did the work. */
  private async record<T extends 'TASKS_ARCHIVED' | 'TASKS_RESTORED' | 'TASKS_CATALOGUED'>(
    trx: Db,
    type: T,
    payload: EventPayload<T>,
  ): Promise<void> {
    const batch = validateBatch(ARCHIVE_STREAM, [{ type, payload } as NewEvent], 'any');
    const head = await trx
      .selectFrom('events')
      .select((eb) => eb.fn.max('sequence').as('v'))
      .where('task_id', '=', ARCHIVE_STREAM)
      .executeTakeFirst();
    const [envelope] = buildEnvelopes(
      ARCHIVE_STREAM,
      batch,
      { version: Number(head?.v ?? 0), session_id: null, last_type: null },
      new Date().toISOString(),
    );
    // on SQLite after this transaction's deletes too, a position past every one the log ever gave
    await (
      isPostgres(this.db)
        ? sql`INSERT INTO events (${sql.raw(EVENT_INSERT_COLUMNS)}) VALUES (${sql.join(eventRowValues(envelope))})`
        : sql`INSERT INTO events (position, ${sql.raw(EVENT_INSERT_COLUMNS)}) VALUES (${sql.raw(NEXT_EVENT_POSITION)}, ${sql.join(eventRowValues(envelope))})`
    ).execute(trx);
    if (isPostgres(this.db))
      await sql`UPDATE event_log_head SET event_count = event_count + 1 WHERE id = 1`.execute(trx);
  }
}

/** Per stream of the batch: where its events start and end, and the tree it belongs to. */
function segmentTasks(events: readonly EventRow[], rootOf: ReadonlyMap<string, PlannedTree>): SegmentTask[] {
  const byStream = new Map<string, SegmentTask & { last_type: string }>();
  for (const e of events) {
    const t = byStream.get(e.task_id);
    if (!t) {
      const tree = rootOf.get(e.task_id)!;
      byStream.set(e.task_id, {
        task_id: e.task_id,
        root_task_id: tree.root_task_id,
        session_id: tree.session_id,
        last_sequence: e.sequence,
        event_count: 1,
        first_position: e.position,
        last_position: e.position,
        last_type: e.type,
      });
      continue;
    }
    if (e.sequence > t.last_sequence) {
      t.last_sequence = e.sequence;
      t.last_type = e.type;
    }
    t.event_count++;
    t.last_position = e.position;
  }
  return [...byStream.values()].map(({ last_type, ...t }) => {
    // a task's stream moves only once it ended: a waiting task's last event is never final
    if (rootOf.get(t.task_id)!.task_ids.includes(t.task_id) && !isFinalEventType(last_type))
      throw new ArchiveConflict(`${t.task_id} does not end with a final event`);
    return t;
  });
}
