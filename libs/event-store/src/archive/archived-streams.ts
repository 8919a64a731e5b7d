import { Kysely, Selectable } from 'kysely';
import { ArchivedRange, ReadAllOptions, ReadStreamOptions } from '../event-store';
import { EventRow } from '../sqlite/rows';
import { ArchivedTasksTable, Database } from '../sqlite/schema';
import { CatalogReader } from './archive-catalog';
import { SegmentContent, decodeSegment } from './segment';

export type { ArchivedRange };

export type ArchivedTaskRow = Selectable<ArchivedTasksTable>;

/** A segment's bytes, by id: a file beside a SQLite database, a row on PostgreSQL. */
export type SegmentBytes = (segmentId: string) => Promise<Buffer>;

/** decoded segments kept: a task's pages are read one after another from the same one */
const CACHED_SEGMENTS = 4;

/** segment records read per query while merging archived events into a page of the global log */
const SEGMENTS_PAGE = 100;

/**
 * The event store's read side of the archive: an archived task's stream, served from its segment
 * (checksum checked on every load) as the live table served it. A task is either wholly live or
 * wholly archived: the triggers refuse appends to an archived one, and the archiver moves a task's
 * whole stream in one transaction.
 */
export class ArchivedStreams {
  private readonly cache = new Map<string, Promise<SegmentContent>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly bytesOf: SegmentBytes,
    /** where tasks archived long ago are recorded (the second tier): read after the live table */
    private readonly catalog: CatalogReader | null = null,
  ) {}

  async task(taskId: string): Promise<ArchivedTaskRow | undefined> {
    return (
      (await this.db
        .selectFrom('archived_tasks')
        .selectAll()
        .where('task_id', '=', taskId)
        .executeTakeFirst()) ??
      (await this.catalog
        ?.db()
        ?.selectFrom('catalog_archived_tasks')
        .selectAll()
        .where('task_id', '=', taskId)
        .executeTakeFirst())
    );
  }

  /** The archived tasks (live records and catalogued ones, once each) of the given segments. */
  private async tasksOf(
    segmentIds: readonly string[],
    taskId?: string,
  ): Promise<{ segment_id: string; task_id: string }[]> {
    const live = await this.db
      .selectFrom('archived_tasks')
      .select(['segment_id', 'task_id'])
      .where('segment_id', 'in', segmentIds)
      .$if(taskId !== undefined, (q) => q.where('task_id', '=', taskId!))
      .orderBy('first_position')
      .execute();
    const catalog = this.catalog?.db();
    if (!catalog) return live;
    const seen = new Set(live.map((t) => t.task_id));
    const catalogued = (
      await catalog
        .selectFrom('catalog_archived_tasks')
        .select(['segment_id', 'task_id'])
        .where('segment_id', 'in', segmentIds)
        .$if(taskId !== undefined, (q) => q.where('task_id', '=', taskId!))
        .orderBy('first_position')
        .execute()
    ).filter((t) => !seen.has(t.task_id));
    return catalogued.length === 0 ? live : [...live, ...catalogued];
  }

  /** The archived events of a task after `after_seq`, as stored rows; empty when it is not archived. */
  async stream(taskId: string, options: ReadStreamOptions = {}): Promise<EventRow[]> {
    const task = await this.task(taskId);
    if (!task) return [];
    const after = options.after_seq ?? 0;
    if (after >= task.last_sequence) return [];
    const content = await this.segment(task.segment_id);
    const rows = content.events.filter((e) => e.task_id === taskId && e.sequence > after);
    rows.sort((a, b) => a.sequence - b.sequence);
    return options.limit === undefined ? rows : rows.slice(0, options.limit);
  }

  async version(taskId: string): Promise<number> {
    return (await this.task(taskId))?.last_sequence ?? 0;
  }

  /** The segment's content, checked against its recorded checksum. */
  segment(segmentId: string): Promise<SegmentContent> {
    const cached = this.cache.get(segmentId);
    if (cached) return cached;
    const loading = (async () => {
      const record = await this.db
        .selectFrom('archive_segments')
        .select(['sha256'])
        .where('segment_id', '=', segmentId)
        .executeTakeFirst();
      if (!record) throw new Error(`archive segment ${segmentId} is not recorded`);
      return decodeSegment(await this.bytesOf(segmentId), record.sha256, segmentId);
    })();
    this.cache.set(segmentId, loading);
    // a failed load is not kept: the next read tries again
    loading.catch(() => this.cache.delete(segmentId));
    if (this.cache.size > CACHED_SEGMENTS) this.cache.delete(this.cache.keys().next().value!);
    return loading;
  }

  /**
   * Segments whose position span reaches past `after` (and starts by `through`, when given), in the
   * order they start, at most `limit`.
   */
  async ranges(after: number, through?: number, limit = 100): Promise<ArchivedRange[]> {
    const segments = await this.db
      .selectFrom('archive_segments')
      .select(['segment_id', 'first_position', 'last_position', 'event_count'])
      .where('last_position', '>', after)
      .$if(through !== undefined, (q) => q.where('first_position', '<=', through!))
      .orderBy('first_position')
      .orderBy('segment_id')
      .limit(limit)
      .execute();
    return this.rangesOfSegments(segments);
  }

  /** The ranges of these segments (those recorded), in the order they start. */
  async rangesOf(segmentIds: readonly string[]): Promise<ArchivedRange[]> {
    if (segmentIds.length === 0) return [];
    const segments = await this.db
      .selectFrom('archive_segments')
      .select(['segment_id', 'first_position', 'last_position', 'event_count'])
      .where('segment_id', 'in', segmentIds)
      .orderBy('first_position')
      .orderBy('segment_id')
      .execute();
    return this.rangesOfSegments(segments);
  }

  private async rangesOfSegments(
    segments: {
      segment_id: string;
      first_position: number | string;
      last_position: number | string;
      event_count: number | string;
    }[],
  ): Promise<ArchivedRange[]> {
    if (segments.length === 0) return [];
    const tasks = await this.tasksOf(segments.map((s) => s.segment_id));
    return segments.map((s) => ({
      segment_id: s.segment_id,
      first_position: Number(s.first_position),
      last_position: Number(s.last_position),
      event_count: Number(s.event_count),
      task_ids: tasks.filter((t) => t.segment_id === s.segment_id).map((t) => t.task_id),
    }));
  }

  /**
   * A page of the live table (`live`, read with `options`) with the archived events of the same
   * window merged in, in position order: after `after_position`, through the live page's last
   * position when the page is full (past it, the next page brings them), cut to the limit.
   */
  async mergeInto(live: EventRow[], options: ReadAllOptions): Promise<EventRow[]> {
    const limit = options.limit;
    const full = limit !== undefined && live.length >= limit;
    const archived = await this.rowsAfter(
      options.after_position ?? 0,
      full ? live[live.length - 1].position : Infinity,
      options,
    );
    if (archived.length === 0) return live;
    const merged = [...live, ...archived].sort((a, b) => a.position - b.position);
    return limit === undefined ? merged : merged.slice(0, limit);
  }

  /**
   * Archived events (of tasks still archived) after `after` through `through`, matching the
   * options' types and task, oldest first, at most `options.limit` of them. Segments are read in
   * the order their spans start; once `limit` events are in hand, a segment starting past the last
   * of them has none to add.
   */
  private async rowsAfter(after: number, through: number, options: ReadAllOptions): Promise<EventRow[]> {
    const limit = options.limit ?? Infinity;
    const types = options.types ? new Set<string>(options.types) : null;
    let bound = through;
    const out: EventRow[] = [];
    let page: { segment_id: string; first_position: number }[] = [];
    do {
      const last = page.at(-1);
      page = await this.db
        .selectFrom('archive_segments')
        .select(['segment_id', 'first_position'])
        .where('last_position', '>', after)
        .$if(Number.isFinite(bound), (q) => q.where('first_position', '<=', bound))
        .$if(last !== undefined, (q) =>
          q.where((eb) =>
            eb.or([
              eb('first_position', '>', last!.first_position),
              eb.and([
                eb('first_position', '=', last!.first_position),
                eb('segment_id', '>', last!.segment_id),
              ]),
            ]),
          ),
        )
        .orderBy('first_position')
        .orderBy('segment_id')
        .limit(SEGMENTS_PAGE)
        .execute();
      for (const s of page) {
        if (Number(s.first_position) > bound) return out;
        const tasks = new Set((await this.tasksOf([s.segment_id], options.task_id)).map((t) => t.task_id));
        if (tasks.size === 0) continue;
        for (const e of (await this.segment(s.segment_id)).events)
          if (
            e.position > after &&
            e.position <= bound &&
            tasks.has(e.task_id) &&
            (!types || types.has(e.type))
          )
            out.push(e);
        if (out.length >= limit) {
          out.sort((a, b) => a.position - b.position);
          out.length = limit;
          bound = out[limit - 1].position;
        }
      }
    } while (page.length === SEGMENTS_PAGE);
    return out.sort((a, b) => a.position - b.position);
  }

  /** A segment rewritten or restored away is read afresh. */
  forget(segmentId: string): void {
    this.cache.delete(segmentId);
  }
}
