import type { EventLoopUtilization } from 'node:perf_hooks';
import { NewEvent, RuntimeEvent, isSystemSession } from '@runledger/contracts';
import type BetterSqlite3 from 'better-sqlite3';
import { allWriterChecked, validateBatch } from '../append-batch';
import {
  AppendOptions,
  AppendResult,
  CommitListener,
  EventStore,
  EventHead,
  RawEvent,
  rawEventOf,
  ReadAllOptions,
  ReadStreamOptions,
  StoreHead,
} from '../event-store';
import { allQuery, eventHeads, streamQuery, streamRows, streamVersion } from '../event-queries';
import { GroupCommitOptions, GroupCommitter, GroupResult } from '../group-committer';
import { InlineProjection } from '../inline-projection';
import { GroupOutcome, GroupRequest, StatementRequest } from './append-transaction';
import {
  AdaptiveAppendWriter,
  AppendWriter,
  InlineAppendWriter,
  ProjectionModule,
  ThreadAppendWriter,
  WriterThreadOptions,
  loadProjection,
} from './append-writer';
import { CatalogReader, SqliteCatalogFile, sqliteCatalog } from '../archive/archive-catalog';
import { ArchivedRange, ArchivedStreams } from '../archive/archived-streams';
import { decodeSegment, readSegmentFile, segmentFile, segmentFolder } from '../archive/segment';
import { SqliteHandle } from './open-sqlite';
import { LAST_EVENT_POSITION } from './positions';
import { EventRow, RAW_EVENT_JSON, rowToEvent, servedRaw } from './rows';
import { SqliteSealing } from './append-transaction';
import { KeyOwner, openEventJson, sealText } from '../sealing/sealed-payload';
import {
  SqliteDataKeys,
  dataKeysOf,
  dataKeysPath,
  openCopiesThrough,
  openedThrough,
  unlockKeyStore,
} from '../sealing/sqlite-data-keys';
import { KeyWrap } from '../sealing/key-wrap';
import { PayloadSealer } from '../sealing/payload-sealer';

export interface SqliteEventStoreOptions {
  /**
   * Seal the personal fields of new payloads under their session's data key (`<db>.keys`), so an
   * erasure shreds them (docs/retention.md, "Erasure"). Reads open sealed payloads whatever this
   * says, and an erased session takes no events either way. Needs a database file.
   */
  sealPayloads?: boolean;
  /**
   * The key-encryption key (32 bytes, RUNLEDGER_ERASURE_KEY_FILE) the data keys in `<db>.keys` are
   * stored wrapped with. A key file written with one refuses to open without it (KeyWrapError); a
   * key file of raw keys opened with one has them wrapped then.
   */
  keyEncryptionKey?: Buffer;
  /** read models updated inside every append transaction, in this order */
  projections?: readonly InlineProjection[];
  /** how long SQLITE_BUSY is retried (beyond busy_timeout) before an append gives up */
  busyRetryMs?: number;
  /**
   * While someone listens to commits: how often to look for commits of other
   * connections to the file (another process), which are published too.
   * Default 200 ms; 0 turns it off.
   */
  foreignCommitPollMs?: number;
  /** how appends are grouped into transactions; default: everything queued by the next setImmediate */
  groupCommit?: GroupCommitOptions;
  /**
   * Run the write connection in a worker thread: the append transactions,
   * their inline projections (built there from `projections`, since objects
   * do not cross threads), the fsync and busy retries never block the event
   * loop. Reads stay on `handle`. Needs a file (not `:memory:`); the inline
   * `projections` option is for the in-thread writer only.
   */
  writerThread?: {
    projections?: readonly ProjectionModule[];
    /**
     * `inline`: the thread commits only while appenders are concurrent; a lone
     * appender commits on `handle`'s connection (AdaptiveAppendWriter), never
     * waiting for a lock there. Default `thread`: every group on the thread.
     */
    whileAlone?: 'thread' | 'inline';
    /** with `whileAlone: 'inline'`: how long the thread keeps the commits after a concurrent group */
    concurrencyHoldMs?: number;
  };
}

export { StoreBusyError } from './append-transaction';

/** What the store's writes cost so far: the figures the benchmark and the commit-count tests read. */
export interface CommitStats {
  /**
   * every transaction the store ran: `commits`, plus those holding only
   * routed statements (SqliteHandle.routeWrites); with a writer thread, one
   * round trip to it each
   */
  transactions: number;
  /** transactions that wrote at least one event: one fsync each at synchronous=FULL */
  commits: number;
  /** appends that wrote events (idempotent retries and refused appends not counted) */
  appends: number;
  events: number;
}

const PUBLISH_PAGE = 1000;

/** The writer thread opens the same file with the pragmas of the store's own connection. */
function writerThreadOptions(
  handle: SqliteHandle,
  busyRetryMs: number,
  options: SqliteEventStoreOptions,
  keys: SqliteDataKeys | null,
): WriterThreadOptions {
  const raw = handle.raw;
  if (raw.memory)
    throw new Error('a writer thread needs a database file; :memory: is private to its connection');
  if (options.projections?.length)
    throw new Error('with a writer thread, projections are given as modules (writerThread.projections)');
  return {
    path: raw.name,
    synchronous: handle.appendSynchronous,
    busyTimeoutMs: Number(raw.pragma('busy_timeout', { simple: true })),
    busyRetryMs,
    projections: options.writerThread?.projections ?? [],
    ...(keys
      ? {
          sealing: {
            keysPath: keys.path,
            seal: options.sealPayloads === true,
            ...(options.keyEncryptionKey ? { keyEncryptionKey: options.keyEncryptionKey } : {}),
          },
        }
      : {}),
  };
}

/** The thread's writer, or the adaptive one that takes the thread only while appenders are concurrent. */
function threadWriter(
  handle: SqliteHandle,
  threadOptions: WriterThreadOptions,
  { whileAlone = 'thread', concurrencyHoldMs }: NonNullable<SqliteEventStoreOptions['writerThread']>,
  sealing: SqliteSealing | null,
): AppendWriter {
  if (whileAlone === 'thread') return new ThreadAppendWriter(threadOptions);
  const projections = threadOptions.projections.map((p) => loadProjection(p, handle));
  return new AdaptiveAppendWriter(
    handle.raw,
    projections,
    handle.appendSynchronous,
    new ThreadAppendWriter(threadOptions),
    concurrencyHoldMs,
    sealing,
  );
}

/** A RawEvent's columns: routing fields and the event's JSON built in SQL. */
const RAW_EVENT_COLUMNS = ['position', 'sequence', 'task_id', 'type', RAW_EVENT_JSON.as('json')] as const;

/**
 * EventStore on SQLite. Appends are group-committed: those that arrive
 * together share one BEGIN IMMEDIATE transaction of prepared statements (one
 * commit, one fsync), each append checked, written and projected in its own
 * savepoint (SqliteAppendTransaction), and every caller's promise settles
 * after the commit. The transaction runs on the raw better-sqlite3 connection
 * of `handle`, or with `writerThread` on a connection of its own in a worker
 * thread. Reads go through kysely on `handle`.
 *
 * Committed events are handed to `onCommitted` listeners (the EventBus) after
 * the commit returns and before any of its callers resume, in position order.
 */
export class SqliteEventStore extends EventStore {
  private readonly raw: BetterSqlite3.Database;
  private readonly busyRetryMs: number;
  private readonly stmt: {
    maxPosition: BetterSqlite3.Statement<[], { position: number | null }>;
    /** the highest position ever given: archived events keep theirs */
    lastPosition: BetterSqlite3.Statement<[], { position: number | null }>;
    /** positions after the first and before the second, at most PUBLISH_PAGE of them */
    between: BetterSqlite3.Statement<[number, number], EventRow>;
    /** streamVersion's and readStream's queries (see readsNow) */
    version: BetterSqlite3.Statement<[string], { version: number | null }>;
    stream: BetterSqlite3.Statement<[string, number], EventRow>;
    streamPage: BetterSqlite3.Statement<[string, number, number], EventRow>;
  };
  /** last position handed to commit listeners: they get every position after it, in order, once */
  private published: number;
  private readonly pollMs: number;
  private poll: { timer: NodeJS.Timeout; dataVersion: number } | null = null;
  private listeners = 0;
  private readonly writer: AppendWriter;
  private readonly committer: GroupCommitter<GroupRequest, GroupOutcome>;
  private readonly counts: CommitStats = { transactions: 0, commits: 0, appends: 0, events: 0 };
  private readonly archive: ArchivedStreams;
  private readonly catalog: CatalogReader;
  /** the database's data keys (null for :memory:, which has no file to keep them beside) */
  readonly dataKeys: SqliteDataKeys | null;
  private readonly sealPayloads: boolean;

  constructor(
    private readonly handle: SqliteHandle,
    options: SqliteEventStoreOptions = {},
  ) {
    super();
    this.raw = handle.raw;
    this.busyRetryMs = options.busyRetryMs ?? 60_000;
    if (options.sealPayloads && this.raw.memory)
      throw new Error('sealed payloads need a database file: their keys are kept beside it');
    const wrap = options.keyEncryptionKey ? new KeyWrap(options.keyEncryptionKey) : null;
    // one-off readers of the same file in this process (a rebuild) open it with the same key
    if (wrap && !this.raw.memory) unlockKeyStore(dataKeysPath(this.raw.name), wrap);
    this.dataKeys = this.raw.memory
      ? null
      : new SqliteDataKeys(
          dataKeysPath(this.raw.name),
          Number(this.raw.pragma('busy_timeout', { simple: true })),
          wrap,
        );
    // a key file wrapped by a key-encryption key refuses to open without it, here rather than at a first read
    this.dataKeys?.refresh();
    this.sealPayloads = options.sealPayloads === true;
    // pages an erasure's refold or a rewrite of a sealed row frees are zeroed, not left readable
    if (this.sealPayloads) this.raw.pragma('secure_delete = ON');
    const sealing = this.dataKeys && { keys: this.dataKeys, seal: options.sealPayloads === true };
    const threadOptions = options.writerThread
      ? writerThreadOptions(handle, this.busyRetryMs, options, this.dataKeys)
      : null;
    this.stmt = {
      maxPosition: this.raw.prepare('SELECT max(position) AS position FROM events'),
      lastPosition: this.raw.prepare(`SELECT ${LAST_EVENT_POSITION} AS position`),
      between: this.raw.prepare(
        `SELECT * FROM events WHERE position > ? AND position < ? ORDER BY position LIMIT ${PUBLISH_PAGE}`,
      ),
      version: this.raw.prepare('SELECT max(sequence) AS version FROM events WHERE task_id = ?'),
      stream: this.raw.prepare('SELECT * FROM events WHERE task_id = ? AND sequence > ? ORDER BY sequence'),
      streamPage: this.raw.prepare(
        'SELECT * FROM events WHERE task_id = ? AND sequence > ? ORDER BY sequence LIMIT ?',
      ),
    };
    this.published = this.stmt.maxPosition.get()?.position ?? 0;
    const folder = segmentFolder(this.raw.name);
    this.catalog = sqliteCatalog(this.raw.name, Number(this.raw.pragma('busy_timeout', { simple: true })));
    this.archive = new ArchivedStreams(
      handle.db,
      async (id) => readSegmentFile(segmentFile(folder, id)),
      this.catalog,
    );
    this.pollMs = options.foreignCommitPollMs ?? 200;
    this.writer = threadOptions
      ? threadWriter(handle, threadOptions, options.writerThread ?? {}, sealing)
      : new InlineAppendWriter(handle, options.projections ?? [], this.busyRetryMs, sealing);
    this.committer = new GroupCommitter((requests) => this.commitGroup(requests), options.groupCommit);
    // the handle's other writes take the thread's connection too, riding in its groups: two writing
    // connections would wait on each other's locks, this one in a busy handler that sleeps on the event loop
    if (threadOptions)
      handle.routeWrites((sql, parameters, ride) =>
        this.routed({ kind: 'statement', sql, parameters }, ride),
      );
  }

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const batch = validateBatch(taskId, events, options.expected);
    const outcome = await this.committer.submit({
      kind: 'append',
      taskId,
      batch,
      expected: options.expected,
      ...(options.lease ? { lease: { owner: options.lease.owner, epoch: options.lease.epoch } } : {}),
      // the writer's fold holds for what is written only when the events are those it folded
      ...(options.folded && allWriterChecked(events) ? { folded: options.folded } : {}),
    });
    if (outcome.kind === 'executed') throw new Error('the store answered an append as a statement');
    if (outcome.kind === 'retry') {
      return {
        nextExpectedSequence: outcome.version,
        positions: outcome.originals.map((e) => e.position),
        events: outcome.originals,
      };
    }
    const last = outcome.events[outcome.events.length - 1];
    return {
      nextExpectedSequence: last.sequence,
      positions: outcome.events.map((e) => e.position),
      events: outcome.events,
    };
  }

  /**
   * Resolves once appends can commit: at once on this thread's connection,
   * once the writer thread opened its own otherwise (appends made before then
   * wait for it). Rejects when the thread could not start.
   */
  ready(): Promise<void> {
    return this.writer.ready();
  }

  override commitThreadUse(): EventLoopUtilization | null {
    return this.writer.threadUse();
  }

  /** Groups the writer thread committed; with `whileAlone: 'inline'` the others were committed on `handle`. */
  threadGroups(): number {
    if (this.writer instanceof AdaptiveAppendWriter) return this.writer.threadGroups();
    return this.writer instanceof ThreadAppendWriter ? this.counts.transactions : 0;
  }

  private async routed(statement: StatementRequest, ride: boolean) {
    const outcome = await this.committer.submit(statement, { ride });
    if (outcome.kind !== 'executed') throw new Error('the store answered a statement as an append');
    return outcome.result;
  }

  /** Commits and appends made through this store so far. */
  commitStats(): CommitStats {
    return { ...this.counts };
  }

  /** One group: its transaction (retried whole while the file is busy), then its events to the listeners. */
  private async commitGroup(requests: readonly GroupRequest[]): Promise<GroupResult<GroupOutcome>[]> {
    const results = await this.writer.run(requests);
    this.counts.transactions++;
    const written: RuntimeEvent[] = [];
    for (const r of results) if (r.ok && r.value.kind === 'written') written.push(...r.value.events);
    if (written.length > 0) {
      this.counts.commits++;
      this.counts.appends += results.filter((r) => r.ok && r.value.kind === 'written').length;
      this.counts.events += written.length;
      this.publish(written);
    }
    return results;
  }

  override onCommitted(listener: CommitListener): () => void {
    const remove = super.onCommitted(listener);
    if (++this.listeners === 1) {
      // a first listener hears from now on: what was committed before is for it to read
      this.published = Math.max(this.published, this.stmt.maxPosition.get()?.position ?? 0);
      this.startPolling();
    }
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      remove();
      if (--this.listeners === 0) this.stopPolling();
    };
  }

  /**
   * Hand committed events to the listeners in position order with no gap: a
   * position below them that is not published yet was committed by another
   * connection (another process on the file) and is read and published first.
   * What was already published is never published again.
   */
  private publish(events: readonly RuntimeEvent[]): void {
    const fresh = events.filter((e) => e.position > this.published);
    if (fresh.length === 0) return;
    if (this.listeners > 0) this.publishUpTo(fresh[0].position);
    this.emitCommitted(fresh);
    this.published = fresh[fresh.length - 1].position;
  }

  /** Publish what is stored between the last published position and `before`, page by page. */
  private publishUpTo(before: number): void {
    while (this.published + 1 < before) {
      const page = this.opened(this.stmt.between.all(this.published, before).map(rowToEvent));
      if (page.length === 0) return;
      this.emitCommitted(page);
      this.published = page[page.length - 1].position;
    }
  }

  /** Commits of other connections bump PRAGMA data_version; publish what they added. */
  private startPolling(): void {
    if (this.pollMs <= 0 || this.poll) return;
    const dataVersion = () => Number(this.raw.pragma('data_version', { simple: true }));
    const poll = { dataVersion: dataVersion(), timer: null as unknown as NodeJS.Timeout };
    poll.timer = setInterval(() => {
      try {
        const now = dataVersion();
        if (now === poll.dataVersion) return;
        this.publishUpTo((this.stmt.maxPosition.get()?.position ?? 0) + 1);
        poll.dataVersion = now;
      } catch {
        // the connection was closed under us (or is busy): the next tick, or the next append, catches up
        if (!this.raw.open) this.stopPolling();
      }
    }, this.pollMs);
    poll.timer.unref();
    this.poll = poll;
  }

  private stopPolling(): void {
    if (this.poll) clearInterval(this.poll.timer);
    this.poll = null;
  }

  /**
   * Whether a read may run on the connection at once, as a prepared statement, rather than through
   * kysely: while no kysely transaction holds the connection (it would see that transaction's
   * uncommitted writes; kysely's read waits for it to end). The append transactions are synchronous
   * and never leave it open. With a writer thread no kysely transaction can start on it at all, and
   * kysely's own reads run at once too: the same read, without its build and async hops.
   */
  private readsNow(): boolean {
    return !this.raw.inTransaction;
  }

  /** The live table's rows, or, for an archived task (none live), its segment's. */
  async readStream(taskId: string, options: ReadStreamOptions = {}): Promise<RuntimeEvent[]> {
    const rows = this.readsNow()
      ? this.streamRowsNow(taskId, options)
      : await streamRows(this.handle.db, taskId, options);
    return this.opened((rows.length > 0 ? rows : await this.archive.stream(taskId, options)).map(rowToEvent));
  }

  /**
   * The event's JSON is built in SQL around the stored payload text: no parse, no re-serialisation
   * (but for sealed payloads and erased sessions, see openEventJson).
   */
  override async readStreamRaw(taskId: string, options: ReadStreamOptions = {}): Promise<RawEvent[]> {
    const rows = (await streamQuery(this.handle.db, taskId, options)
      .select(RAW_EVENT_COLUMNS)
      .execute()) as RawEvent[];
    if (rows.length > 0) return this.openedRaw(servedRaw(rows));
    return this.opened((await this.archive.stream(taskId, options)).map(rowToEvent)).map(rawEventOf);
  }

  override async sealCopy(owner: KeyOwner, text: string): Promise<string> {
    const keys = this.dataKeys;
    if (!keys || !this.sealPayloads || isSystemSession(owner.session_id)) return text;
    keys.refresh();
    const state = keys.existingKey(owner);
    // an owner without a key wrote its events in clear (before sealing was on): its copies follow
    // them; an erased owner's copy is made from its erased events and holds no content
    return state && state !== 'erased' ? sealText(text, state, owner) : text;
  }

  override async openCopy(text: string): Promise<string | null> {
    return (await this.openCopies([text]))[0];
  }

  override async openCopies(texts: readonly (string | null)[]): Promise<(string | null)[]> {
    return openCopiesThrough(this.dataKeys, texts);
  }

  /** Events as readers get them: sealed payloads opened, erased sessions' content marked erased. */
  opened(events: RuntimeEvent[]): RuntimeEvent[] {
    return openedThrough(this.dataKeys, events);
  }

  private openedRaw(rows: RawEvent[]): RawEvent[] {
    const keys = this.dataKeys;
    if (!keys) return rows;
    keys.refresh();
    const anyErased = keys.anyErased();
    for (let i = 0; i < rows.length; i++) {
      const json = openEventJson(rows[i].json, keys, anyErased);
      if (json !== rows[i].json) rows[i] = { ...rows[i], json };
    }
    return rows;
  }

  override archivedRanges(afterPosition: number, through?: number, limit?: number): Promise<ArchivedRange[]> {
    return this.archive.ranges(afterPosition, through, limit);
  }

  override archivedRangesOf(segmentIds: readonly string[]): Promise<ArchivedRange[]> {
    return this.archive.rangesOf(segmentIds);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RuntimeEvent[]> {
    const live = await allQuery(this.handle.db, options).selectAll().execute();
    return this.opened(
      (options.archived ? await this.archive.mergeInto(live, options) : live).map(rowToEvent),
    );
  }

  override async readAllRaw(options: ReadAllOptions = {}): Promise<RawEvent[]> {
    if (options.archived) return (await this.readAll(options)).map(rawEventOf);
    return this.openedRaw(
      servedRaw((await allQuery(this.handle.db, options).select(RAW_EVENT_COLUMNS).execute()) as RawEvent[]),
    );
  }

  override readHeads(options: ReadAllOptions = {}): Promise<EventHead[]> {
    // archived events have no stored heads to read apart: read whole, then cut
    return options.archived ? super.readHeads(options) : eventHeads(this.handle.db, options);
  }

  /**
   * Without counting: each insert takes one past the highest position given
   * (positions.ts), and a rolled-back append (its savepoint or its whole
   * transaction) gives its positions back, so positions have no gaps and the
   * highest one given is the count of the log's events. An archived event
   * leaves the table but keeps its position in the log (event_position_floor
   * remembers it), so archiving changes neither figure. Two seeks: the rowid
   * b-tree's end and the one row of event_position_floor.
   */
  async head(): Promise<StoreHead> {
    const position = this.stmt.lastPosition.get()?.position ?? 0;
    return { position, event_count: position };
  }

  private streamRowsNow(taskId: string, options: ReadStreamOptions): EventRow[] {
    const after = options.after_seq ?? 0;
    return options.limit === undefined
      ? this.stmt.stream.all(taskId, after)
      : this.stmt.streamPage.all(taskId, after, options.limit);
  }

  async streamVersion(taskId: string): Promise<number> {
    const live = this.readsNow()
      ? (this.stmt.version.get(taskId)?.version ?? 0)
      : await streamVersion(this.handle.db, taskId);
    return live || this.archive.version(taskId);
  }

  /** Waits for queued appends to settle; the store does not own the connection: whoever opened it closes it. */
  async close(): Promise<void> {
    await this.committer.drain();
    this.stopPolling();
    this.handle.routeWrites(null);
    await this.writer.close();
    this.dataKeys?.close();
    await this.catalog.close();
  }
}

const REBUILD_PAGE = 1000;

/**
 * Empty a projection and refold the whole log into it, in one write
 * transaction so appends wait and nobody sees it half built. Returns the
 * number of events folded.
 */
export function rebuildProjection(
  raw: BetterSqlite3.Database,
  projection: InlineProjection,
  { sealCopies = false }: { sealCopies?: boolean } = {},
): number {
  const page = raw.prepare<[number, number], EventRow>(
    'SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?',
  );
  const keys = dataKeysOf(raw);
  const catalog = new SqliteCatalogFile(raw.name);
  try {
    const copies = keys ? new PayloadSealer(keys, sealCopies) : undefined;
    return rebuildWith(raw, projection, page, (events) => openedThrough(keys, events), copies, catalog);
  } finally {
    keys?.close();
    catalog.close();
  }
}

function rebuildWith(
  raw: BetterSqlite3.Database,
  projection: InlineProjection,
  page: BetterSqlite3.Statement<[number, number], EventRow>,
  open: (events: RuntimeEvent[]) => RuntimeEvent[],
  copies: PayloadSealer | undefined,
  catalog: SqliteCatalogFile,
): number {
  return raw
    .transaction(() => {
      projection.reset(raw);
      let count = 0;
      for (let after = 0; ;) {
        const events = open(page.all(after, REBUILD_PAGE).map(rowToEvent));
        if (events.length === 0) break;
        projection.apply(raw, events, copies);
        count += events.length;
        after = events[events.length - 1].position;
      }
      // archived tasks are the log's too: their streams are folded from their segments
      for (const { events: archived, catalogued } of archivedStreamsOf(raw, catalog)) {
        const events = open(archived);
        projection.apply(raw, events, copies);
        if (catalogued.length > 0) projection.dropCatalogued?.(raw, catalogued);
        count += events.length;
      }
      return count;
    })
    .immediate();
}

/**
 * Each archive segment's events whose tasks are still archived, read synchronously (inside a
 * transaction), and which of those tasks are catalogued (recorded in the catalog, not the live table).
 */
function* archivedStreamsOf(
  raw: BetterSqlite3.Database,
  catalog: SqliteCatalogFile,
): Generator<{ events: RuntimeEvent[]; catalogued: string[] }> {
  const segments = raw
    .prepare<[], { segment_id: string; sha256: string }>(
      'SELECT segment_id, sha256 FROM archive_segments ORDER BY first_position',
    )
    .all();
  const tasksOf = raw.prepare<[string], { task_id: string }>(
    'SELECT task_id FROM archived_tasks WHERE segment_id = ?',
  );
  const folder = segmentFolder(raw.name);
  for (const s of segments) {
    const content = decodeSegment(readSegmentFile(segmentFile(folder, s.segment_id)), s.sha256, s.segment_id);
    const archived = new Set(tasksOf.all(s.segment_id).map((r) => r.task_id));
    const catalogued = catalog.tasksOfSegment(s.segment_id).filter((id) => !archived.has(id));
    for (const id of catalogued) archived.add(id);
    yield { events: content.events.filter((e) => archived.has(e.task_id)).map(rowToEvent), catalogued };
  }
}
