import { RuntimeEvent, canonicalJson, erasedMarkOf, parseEventBody } from '@runledger/contracts';
import { CatalogDatabase, Database, SegmentBytes, decodeSegment, rowToEvent } from '@runledger/event-store';
import { Kysely } from 'kysely';
import { StateStoreDatabase, StateStoreTables, TasksTable } from './schema';
import { PERSONAL_TASK_COLUMNS, TASK_COLUMNS, TaskRow, foldRun, stateToRow } from './task-state-store';
import { OpenCopies, openTaskRows, openedAsStored } from './sealed-task-rows';

/** One thing a verification found wrong, about one stream (or the log as a whole: task_id null). */
export interface LogProblem {
  task_id: string | null;
  problem: string;
}

export interface LogVerification {
  ok: boolean;
  /** streams read (tasks and system streams) */
  streams: number;
  /** streams that are tasks, each folded and compared with its row */
  tasks: number;
  events: number;
  problems: LogProblem[];
}

/** Problems beyond this many are counted, not listed. */
const MAX_LISTED = 100;

/** What is wrong with one stream read in sequence order, its events and its stored row. */
export function streamProblems(
  taskId: string,
  events: readonly RuntimeEvent[],
  row: TaskRow | undefined,
): string[] {
  const problems: string[] = [];
  events.forEach((e, i) => {
    if (e.sequence !== i + 1) problems.push(`sequence ${e.sequence} where ${i + 1} was due`);
    if (i > 0 && e.position <= events[i - 1].position)
      problems.push(
        `position ${e.position} at sequence ${e.sequence} does not follow ${events[i - 1].position}`,
      );
    // an erased event's content is gone by design: its shape is not the catalogue's any more
    if (erasedMarkOf(e.payload) === null)
      try {
        parseEventBody(e);
      } catch (err) {
        problems.push(`event ${e.event_id} (${e.type}) does not parse: ${(err as Error).message}`);
      }
  });
  let folded: ReturnType<typeof foldRun> = null;
  try {
    folded = foldRun(undefined, events);
  } catch (err) {
    problems.push(`the stream does not fold: ${(err as Error).message}`);
  }
  if (folded === null && row !== undefined) problems.push('a task row for a stream that is not a task');
  if (folded !== null && row === undefined) problems.push('no task row for the task');
  if (folded !== null && row !== undefined) {
    const want = stateToRow(folded);
    // a row made before its content was erased (a backup's) may still hold it: only the structure compares
    const unreadable = events.some((e) => erasedMarkOf(e.payload) !== null);
    const differ = TASK_COLUMNS.filter(
      (c) =>
        !(unreadable && (PERSONAL_TASK_COLUMNS as readonly string[]).includes(c)) &&
        canonicalJson(want[c]) !== canonicalJson(row[c]),
    );
    if (differ.length > 0)
      problems.push(`its row differs from the fold of its events in ${differ.join(', ')}`);
  }
  return problems.map((p) => `${taskId}: ${p}`);
}

/**
 * Reads a whole log (a backup, a restored database) stream by stream, folds every task and compares
 * the fold with its row in the `tasks` projection; checks that sequences are gap-free, positions
 * rise and every payload parses with today's catalogue. Archived tasks are read from their segments
 * (`segmentBytes`: a SQLite database's files; PostgreSQL's are rows), each checked against its
 * recorded checksum, and folded the same way. Reads only: works on a read-only connection, SQLite or
 * PostgreSQL.
 */
/** Events as readers get them through the database's key store (sealed payloads opened, erased ones marked). */
export type OpenEvents = (events: RuntimeEvent[]) => Promise<RuntimeEvent[]>;

/** `openCopies`: how the rows' sealed columns are opened (EventStore.openCopies over the same key store). */
export async function verifyLog(
  db: Kysely<Database>,
  pageSize = 500,
  segmentBytes?: SegmentBytes,
  open: OpenEvents = async (events) => events,
  openCopies: OpenCopies = openedAsStored,
  /** the archive's catalog (SQLite: a connection with it attached; see CatalogReader), when the database has one */
  catalog: Kysely<CatalogDatabase> | null = null,
): Promise<LogVerification> {
  const tdb: Kysely<StateStoreDatabase> = db.withTables<StateStoreTables>();
  const problems: LogProblem[] = [];
  let unlisted = 0;
  const report = (task_id: string | null, problem: string) =>
    problems.length < MAX_LISTED ? problems.push({ task_id, problem }) : unlisted++;
  let streams = 0;
  let tasks = 0;
  let events = 0;
  const seen = new Set<string>();
  for (let after = ''; ;) {
    const ids = (
      await db
        .selectFrom('events')
        .select('task_id')
        .distinct()
        .where('task_id', '>', after)
        .orderBy('task_id')
        .limit(pageSize)
        .execute()
    ).map((r) => r.task_id);
    if (ids.length === 0) break;
    after = ids[ids.length - 1];
    const rows = new Map(
      (
        await openTaskRows(
          (await tdb.selectFrom('tasks').selectAll().where('task_id', 'in', ids).execute()) as TaskRow[],
          openCopies,
        )
      ).map((r) => [r.task_id, r]),
    );
    for (const id of ids) {
      const stream = await open(
        (
          await db.selectFrom('events').selectAll().where('task_id', '=', id).orderBy('sequence').execute()
        ).map(rowToEvent),
      );
      streams++;
      events += stream.length;
      seen.add(id);
      const row = rows.get(id);
      if (stream[0]?.type === 'TASK_RECEIVED') tasks++;
      for (const p of streamProblems(id, stream, row)) report(id, p);
    }
  }
  const archived = await verifyArchive(db, seen, segmentBytes, report, open, openCopies, catalog);
  streams += archived.streams;
  tasks += archived.tasks;
  events += archived.events;
  const orphans = await tdb.selectFrom('tasks').select('task_id').execute();
  for (const { task_id } of orphans)
    if (!seen.has(task_id)) report(task_id, `${task_id}: a task row without a single event`);
  if (unlisted > 0) report(null, `${unlisted} more problems not listed`);
  return { ok: problems.length === 0, streams, tasks, events, problems };
}

/** A database from before the archive (an old backup) has no archive tables: nothing is archived there. */
async function archiveSegments(db: Kysely<Database>) {
  try {
    return await db.selectFrom('archive_segments').select(['segment_id', 'sha256', 'content']).execute();
  } catch {
    return [];
  }
}

/** A segment's catalogued records; none in a database from before the catalog (an old backup). */
async function catalogRecords(catalog: Kysely<CatalogDatabase>, segmentId: string) {
  try {
    return await catalog
      .selectFrom('catalog_archived_tasks')
      .selectAll()
      .where('segment_id', '=', segmentId)
      .execute();
  } catch {
    return [];
  }
}

/** Every archived stream, read from its segment and checked as a live one is; added to `seen`. */
async function verifyArchive(
  db: Kysely<Database>,
  seen: Set<string>,
  segmentBytes: SegmentBytes | undefined,
  report: (task_id: string | null, problem: string) => void,
  open: OpenEvents,
  openCopies: OpenCopies,
  catalog: Kysely<CatalogDatabase> | null,
): Promise<{ streams: number; tasks: number; events: number }> {
  const tdb: Kysely<StateStoreDatabase> = db.withTables<StateStoreTables>();
  const catalogTasks = catalog?.withTables<{ catalog_tasks: TasksTable }>();
  const counts = { streams: 0, tasks: 0, events: 0 };
  for (const segment of await archiveSegments(db)) {
    const archived = await db
      .selectFrom('archived_tasks')
      .selectAll()
      .where('segment_id', '=', segment.segment_id)
      .execute();
    // tasks that moved on into the catalog (a record in both places is a move under way: the live one counts)
    if (catalog) {
      const live = new Set(archived.map((a) => a.task_id));
      for (const c of await catalogRecords(catalog, segment.segment_id))
        if (!live.has(c.task_id)) archived.push(c);
    }
    let content;
    try {
      const bytes = segment.content ?? (segmentBytes ? await segmentBytes(segment.segment_id) : null);
      if (!bytes) throw new Error('no segment content and no folder to read it from');
      content = decodeSegment(bytes, segment.sha256, segment.segment_id);
    } catch (err) {
      report(null, `archive segment ${segment.segment_id} cannot be read: ${(err as Error).message}`);
      for (const a of archived) seen.add(a.task_id);
      continue;
    }
    for (const a of archived) {
      // the live streams were read first: one already seen is in both places
      if (seen.has(a.task_id))
        report(a.task_id, `${a.task_id}: archived in ${segment.segment_id} and live as well`);
      seen.add(a.task_id);
      const stream = await open(
        content.events
          .filter((e) => e.task_id === a.task_id)
          .sort((x, y) => x.sequence - y.sequence)
          .map(rowToEvent),
      );
      if (stream.length !== a.event_count || stream[stream.length - 1]?.sequence !== a.last_sequence)
        report(
          a.task_id,
          `${a.task_id}: its segment holds ${stream.length} events, its record ${a.event_count}`,
        );
      const stored = ((await tdb
        .selectFrom('tasks')
        .selectAll()
        .where('task_id', '=', a.task_id)
        .executeTakeFirst()) ??
        (await catalogTasks
          ?.selectFrom('catalog_tasks')
          .selectAll()
          .where('task_id', '=', a.task_id)
          .executeTakeFirst())) as TaskRow | undefined;
      const row = stored && (await openTaskRows([stored], openCopies))[0];
      counts.streams++;
      counts.events += stream.length;
      if (stream[0]?.type === 'TASK_RECEIVED') counts.tasks++;
      for (const p of streamProblems(a.task_id, stream, row)) report(a.task_id, p);
    }
  }
  return counts;
}
