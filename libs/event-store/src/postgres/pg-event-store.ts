import {
  NewEvent,
  RuntimeEvent,
  ValidationError,
  isFinalEventType,
  isSystemSession,
} from '@runledger/contracts';
import type { Pool, PoolClient, QueryResult } from 'pg';
import {
  AppendDecision,
  EVENT_INSERT_COLUMNS,
  StreamHead,
  UnpositionedEvent,
  ValidatedEvent,
  archivedTaskError,
  checkLeaseHeld,
  decideAppend,
  eventRowValues,
  validateBatch,
} from '../append-batch';
import {
  AppendOptions,
  AppendResult,
  CommitListener,
  EventStore,
  LeaseToken,
  EventHead,
  ReadAllOptions,
  ReadStreamOptions,
  StoreHead,
} from '../event-store';
import { postgresCatalog } from '../archive/archive-catalog';
import { ArchivedRange, ArchivedStreams } from '../archive/archived-streams';
import { SegmentContent, decodeSegment } from '../archive/segment';
import { EventRow, rowToEvent } from '../sqlite/rows';
import { allQuery, eventHeads, streamRows, streamVersion } from '../event-queries';
import { GroupCommitter, GroupResult } from '../group-committer';
import { PostgresHandle } from './open-postgres';
import {
  CreatedKey,
  KeyRow,
  groupKeys,
  groupKeysSql,
  keyRowsSql,
  keyInserts,
  keysInsertSql,
  openCopiesPg,
  rulesOver,
  openedPg,
  owningStreams,
} from '../sealing/pg-data-keys';
import { KeyOwner, keyOwnerOf, sealText } from '../sealing/sealed-payload';
import { CopySealer, PayloadSealer } from '../sealing/payload-sealer';

/**
 * A read model kept in the append transaction on PostgreSQL (the counterpart of
 * InlineProjection): `apply` runs on the transaction's client after the
 * events are inserted; throwing rolls that append back.
 */
export interface PgInlineProjection {
  readonly name: string;
  /** `copies`: how it stores what it copies of a session's content (see InlineProjection) */
  apply(client: PoolClient, events: readonly RuntimeEvent[], copies?: CopySealer): Promise<void>;
  /** empty the read model, before a rebuild refolds the whole log into it */
  reset(client: PoolClient): Promise<void>;
  /** see InlineProjection.dropCatalogued */
  dropCatalogued?(client: PoolClient, taskIds: readonly string[]): Promise<void>;
}

export interface PgEventStoreOptions {
  /** read models updated inside every append transaction, in this order */
  projections?: readonly PgInlineProjection[];
  /** appends committed in one transaction at most; default 512 */
  maxBatch?: number;
  /**
   * While someone listens to commits, how often to read what other instances
   * committed in case a notification was missed (a dropped LISTEN connection).
   * Default 1000 ms; 0 relies on notifications alone.
   */
  pollMs?: number;
  /**
   * Seal the personal fields of new payloads under their session's data key (table data_keys), so
   * an erasure shreds them (docs/retention.md, "Erasure"). Reads open sealed payloads whatever this
   * says, and an erased session takes no events either way.
   */
  sealPayloads?: boolean;
}

/** The channel appends notify on commit: it only wakes readers, who read the log from the table. */
export const EVENTS_CHANNEL = 'runledger_events';

/**
 * Serialises the position-allocating part of every append transaction (held to
 * commit): positions then become visible in order, so a reader of the global
 * log never passes a position that a slower transaction commits later.
 */
export const APPEND_LOCK_SQL = `SELECT pg_advisory_xact_lock(hashtext('runledger.events:' || current_schema()))`;

const PUBLISH_PAGE = 1000;
const REBUILD_PAGE = 1000;

interface AppendJob {
  taskId: string;
  batch: readonly ValidatedEvent[];
  options: AppendOptions;
}

type AppendOutcome =
  | { kind: 'retry'; originals: RuntimeEvent[]; version: number }
  /** `head`: the stream's head after the events */
  | { kind: 'written'; events: RuntimeEvent[]; head: StreamHead };

/** A stream's head with its last event's id, as this store last wrote it. */
interface KnownHead extends StreamHead {
  session_id: string | null;
  last_type: string | null;
  /** null for a missing stream */
  last_event_id: string | null;
}

const EMPTY_HEAD: KnownHead = { version: 0, session_id: null, last_type: null, last_event_id: null };

/** How many streams' heads a store keeps for predicted appends (the oldest written are forgotten first). */
const KNOWN_HEADS = 10_000;

/** An append group decided on known heads (PgEventStore.predicted): each stream's head it was decided on, each append's envelopes. */
interface PredictedGroup {
  jobs: readonly AppendJob[];
  initial: ReadonlyMap<string, KnownHead>;
  decisions: readonly { head: StreamHead; envelopes: UnpositionedEvent[] }[];
}

const COLUMNS = EVENT_INSERT_COLUMNS.split(',').length;
/** The insert of `values` (`rows` tuples), and the log's event count moved on by as many rows in the same statement. */
const insertSql = (rows: number, values: string, selected = false): string =>
  `WITH inserted AS (
     INSERT INTO events (${EVENT_INSERT_COLUMNS})
     ${selected ? values : `VALUES ${values}`}
     RETURNING event_id, position
   ), counted AS (
     UPDATE event_log_head SET event_count = event_count + ${rows} WHERE id = 1 AND EXISTS (SELECT 1 FROM inserted)
   )
   SELECT event_id, position FROM inserted`;

const insertParametersSql = (rows: number): string =>
  insertSql(
    rows,
    Array.from(
      { length: rows },
      (_, r) => `(${Array.from({ length: COLUMNS }, (_, c) => `$${r * COLUMNS + c + 1}`).join(', ')})`,
    ).join(', '),
  );

// required with the first literal (the pool is open by then): a process on SQLite does not load pg
let pgModule: typeof import('pg') | undefined;
const escapeLiteral = (value: string): string =>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  (pgModule ??= require('pg') as typeof import('pg')).escapeLiteral(value);

/**
 * A value as an SQL literal (pg's own escaping). An append goes as one or two
 * simple queries, each several statements in one round trip (BEGIN to COMMIT;
 * or BEGIN with its reads, then the insert with COMMIT), and a simple query
 * takes no parameters.
 */
function literal(value: string | number | null): string {
  if (value === null) return 'NULL';
  if (typeof value === 'number') return String(value);
  // a query's text ends at NUL, and a text column refuses it anyway
  if (value.includes('\u0000')) throw new ValidationError('a value of an event holds a NUL character');
  return escapeLiteral(value);
}

const textArray = (values: readonly (string | null)[]): string =>
  `ARRAY[${values.map(literal).join(', ')}]::text[]`;

const insertLiteralSql = (
  envelopes: readonly UnpositionedEvent[],
  payloadText: (e: UnpositionedEvent) => string,
): string =>
  insertSql(
    envelopes.length,
    envelopes.map((e) => `(${eventRowValues(e, payloadText).map(literal).join(', ')})`).join(', '),
  );

/** The sessions an append group's events name themselves (explicitly, or a TASK_RECEIVED's). */
const namedSessions = (jobs: readonly AppendJob[]): string[] => [
  ...new Set(
    jobs.flatMap((j) =>
      j.batch.flatMap((e) => {
        const own = e.type === 'TASK_RECEIVED' ? (e.payload as { session_id: string }).session_id : undefined;
        return [e.session_id, own].filter((s): s is string => s !== undefined);
      }),
    ),
  ),
];

const NOTIFY_AND_COMMIT = `SELECT pg_notify('${EVENTS_CHANNEL}', ''); COMMIT`;

/**
 * EventStore on PostgreSQL. Appends are group-committed: those arriving
 * together run in one transaction (one commit, one WAL flush), each under its
 * own SAVEPOINT, so each is checked (version, final event, lease, duplicate
 * ids) and fails on its own. The transaction takes the append lock first
 * (APPEND_LOCK_SQL), which makes every check exact and keeps positions in
 * commit order. Reads go through kysely.
 *
 * Commit listeners get every committed event in position order, once: those
 * this instance wrote right after their commit, and those other instances
 * wrote when a NOTIFY on EVENTS_CHANNEL (or the fallback poll) says there are
 * some.
 */
export class PgEventStore extends EventStore {
  private readonly pool: Pool;
  private readonly projections: readonly PgInlineProjection[];
  private readonly committer: GroupCommitter<AppendJob, AppendOutcome>;
  private readonly pollMs: number;
  /** last position handed to commit listeners */
  private published = 0;
  private publishing: Promise<void> = Promise.resolve();
  /** while a first listener reads where the log stands (see append) */
  private listenStart: Promise<void> | null = null;
  private listeners = 0;
  private listenClient: PoolClient | null = null;
  private connecting = false;
  private pollTimer: NodeJS.Timeout | null = null;
  private unlistening: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly archive: ArchivedStreams;
  private readonly seal: boolean;
  /** the heads of the streams this store wrote last, by task id (predicted) */
  private readonly heads = new Map<string, KnownHead>();

  constructor(
    private readonly handle: PostgresHandle,
    options: PgEventStoreOptions = {},
  ) {
    super();
    this.pool = handle.pool;
    this.seal = options.sealPayloads === true;
    this.projections = options.projections ?? [];
    this.pollMs = options.pollMs ?? 1000;
    this.committer = new GroupCommitter((jobs) => this.flush(jobs), { maxBatch: options.maxBatch });
    this.archive = new ArchivedStreams(
      handle.db,
      async (id) => {
        const row = await handle.db
          .selectFrom('archive_segments')
          .select('content')
          .where('segment_id', '=', id)
          .executeTakeFirst();
        if (!row?.content) throw new Error(`archive segment ${id} holds no content`);
        return row.content;
      },
      postgresCatalog(handle.db),
    );
  }

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const batch = validateBatch(taskId, events, options.expected);
    // a listener that just subscribed reads where the log stands first: an append it should hear of
    // must not commit before that read, or its events would count as committed before it listened
    if (this.listenStart) await this.listenStart;
    const outcome = await this.committer.submit({ taskId, batch, options });
    if (outcome.kind === 'retry') {
      return {
        nextExpectedSequence: outcome.version,
        positions: outcome.originals.map((e) => e.position),
        events: await openedPg(this.pool, outcome.originals),
      };
    }
    await this.publish(outcome.events);
    const last = outcome.events[outcome.events.length - 1];
    return {
      nextExpectedSequence: last.sequence,
      positions: outcome.events.map((e) => e.position),
      events: outcome.events,
    };
  }

  /**
   * One transaction for the group. First all appends at once: their stream
   * heads, stored ids and leases read in one query each, every append decided
   * on its own in order, the accepted events inserted in one statement and
   * projected together. When the database refuses that (a projection's unique
   * key, say), the group is redone one append per SAVEPOINT, so only the
   * append at fault fails.
   */
  private async flush(jobs: readonly AppendJob[]): Promise<GroupResult<AppendOutcome>[]> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      const results = await this.commit(client, jobs);
      this.rememberHeads(jobs, results);
      return results;
    } catch (error) {
      for (const job of jobs) this.heads.delete(job.taskId);
      await client.query('ROLLBACK').catch(() => (broken = true));
      throw error;
    } finally {
      client.release(broken);
    }
  }

  private async commit(
    client: PoolClient,
    jobs: readonly AppendJob[],
  ): Promise<GroupResult<AppendOutcome>[]> {
    const predicted = this.predicted(jobs);
    if (predicted) {
      try {
        const written = await this.commitPredicted(client, predicted);
        if (written) return written;
      } catch {
        // a head, an id or a trigger said no: the reads below decide each append and say why
        await client.query('ROLLBACK');
      }
    }
    try {
      return await this.commitTogether(client, jobs);
    } catch (error) {
      await client.query('ROLLBACK');
      if (jobs.length === 1) throw archivedTaskError(jobs[0].taskId, error);
      return await this.commitOneByOne(client, jobs);
    }
  }

  /**
   * The group decided on the heads this store last wrote (or, for 'no_stream', an empty stream),
   * with no id stored yet and every lease and key as the append carries it: null when some append
   * has no such head or would be refused on it (the reads then decide it exactly), and when payloads
   * are sealed (their keys are read before the payloads are written).
   */
  private predicted(jobs: readonly AppendJob[]): PredictedGroup | null {
    if (this.seal) return null;
    const initial = new Map<string, KnownHead>();
    const current = new Map<string, KnownHead>();
    const decisions: { head: StreamHead; envelopes: UnpositionedEvent[] }[] = [];
    for (const job of jobs) {
      let head = current.get(job.taskId);
      if (!head) {
        head = job.options.expected === 'no_stream' ? EMPTY_HEAD : this.heads.get(job.taskId);
        if (!head) return null;
        initial.set(job.taskId, head);
      }
      let decision: AppendDecision;
      try {
        decision = decideAppend(job.taskId, job.batch, job.options.expected, head, () => undefined);
      } catch {
        return null;
      }
      if (decision.kind !== 'write') return null;
      decisions.push({ head, envelopes: decision.envelopes });
      const last = decision.envelopes[decision.envelopes.length - 1];
      current.set(job.taskId, {
        ...headAfter(head, decision.envelopes),
        last_event_id: last.event_id,
      } as KnownHead);
    }
    const ids = decisions.flatMap((d) => d.envelopes.map((e) => e.event_id));
    if (new Set(ids).size !== ids.length) return null;
    return { jobs, initial, decisions };
  }

  /**
   * A predicted group in one round trip: BEGIN, the append lock, the leases' rows locked, the insert
   * guarded by the heads, leases and keys it was decided on, the notification and COMMIT. The guard
   * reads under the append lock, as the reads of commitTogether do, so what it accepts is what they
   * would decide. With inline projections the first round trip also reads the owners' keys (for
   * the read models' copies) and stops after the insert; the projections run, then the notification
   * and COMMIT go as a second one. Null when the guard held back the insert (the transaction then
   * wrote nothing): the group is decided again from the reads.
   */
  private async commitPredicted(
    client: PoolClient,
    { jobs, initial, decisions }: PredictedGroup,
  ): Promise<GroupResult<AppendOutcome>[] | null> {
    const envelopes = decisions.flatMap((d) => d.envelopes);
    const leased = jobs.filter((j) => j.options.lease);
    const projected = this.projections.length > 0;
    const statements = [`BEGIN; ${APPEND_LOCK_SQL}`];
    if (leased.length > 0) statements.push(leasesSql(textArray([...new Set(leased.map((j) => j.taskId))])));
    if (projected)
      statements.push(
        keyRowsSql(
          textArray([...new Set(envelopes.map((e) => e.session_id))]),
          textArray(owningStreams(envelopes)),
        ),
      );
    const guard = [
      appendGuardSql(initial, envelopes),
      ...leased.map((j) => leaseGuardSql(j.taskId, j.options.lease!)),
    ];
    statements.push(guardedInsertSql(envelopes, guard.join(' AND ')));
    if (!projected) statements.push(NOTIFY_AND_COMMIT);
    const results = (await client.query(statements.join('; '))) as unknown as QueryResult[];
    const at = 2 + Number(leased.length > 0) + Number(projected);
    const inserted = results[at].rows as InsertedRow[];
    if (inserted.length !== envelopes.length) {
      if (projected) await client.query('ROLLBACK');
      return null;
    }
    const positions = positionsOf(inserted);
    if (projected) {
      const written = envelopes.map((e) => ({ ...e, position: positions.get(e.event_id)! }) as RuntimeEvent);
      const sealer = new PayloadSealer(groupKeys(results[at - 1].rows as KeyRow[], false), false);
      for (const projection of this.projections) await projection.apply(client, written, sealer);
      await client.query(NOTIFY_AND_COMMIT);
    }
    return decisions.map((d) => ({
      ok: true,
      value: outcomeOf({ kind: 'write', envelopes: d.envelopes }, positions, d.head),
    }));
  }

  /** Each stream's head after the group, for the next group's prediction; unknown after a failure. */
  private rememberHeads(jobs: readonly AppendJob[], results: readonly GroupResult<AppendOutcome>[]): void {
    jobs.forEach((job, i) => {
      const r = results[i];
      this.heads.delete(job.taskId);
      if (!r.ok || r.value.kind !== 'written') return;
      const last = r.value.events[r.value.events.length - 1];
      // a stream that ended takes nothing more: the reads say so
      if (isFinalEventType(last.type)) return;
      const { version, session_id } = r.value.head;
      this.heads.set(job.taskId, { version, session_id, last_type: last.type, last_event_id: last.event_id });
      if (this.heads.size > KNOWN_HEADS) this.heads.delete(this.heads.keys().next().value!);
    });
  }

  /**
   * Two round trips when no projection runs in the transaction: BEGIN, the append lock and the group's reads
   * in one simple query; the insert, the notification and COMMIT in another.
   */
  private async commitTogether(client: PoolClient, jobs: readonly AppendJob[]) {
    const supplied = jobs.flatMap((j) => j.batch.filter((e) => e.id_supplied).map((e) => e.event_id));
    if (new Set(supplied).size !== supplied.length) throw new Error('one event id in two appends of a group');
    const leased = [...new Set(jobs.filter((j) => j.options.lease).map((j) => j.taskId))];
    const taskIds = textArray([...new Set(jobs.map((j) => j.taskId))]);
    const owners = owningStreams(
      jobs.flatMap((j) => j.batch.map((e) => ({ task_id: j.taskId, session_id: '', payload: e.payload }))),
    );
    const reads = [
      headsSql(taskIds),
      groupKeysSql(taskIds, textArray(namedSessions(jobs)), textArray(owners)),
    ];
    if (supplied.length > 0) reads.push(byIdsSql(textArray(supplied)));
    if (leased.length > 0) reads.push(leasesSql(textArray(leased)));
    const results = (await client.query(
      `BEGIN; ${APPEND_LOCK_SQL}; ${reads.join('; ')}`,
    )) as unknown as QueryResult[];
    const heads = headsOf(results[2].rows as HeadRow[]);
    // read under the append lock, which an erasure takes too: no append commits past an erasure it did not see
    const keys = groupKeys(results[3].rows as KeyRow[], this.seal);
    const sealer = new PayloadSealer(keys, this.seal);
    const texts = new Map<string, string>();
    const stored = storedOf(supplied.length > 0 ? (results[4].rows as EventRow[]) : []);
    const leases = leasesOf(leased.length > 0 ? (results[results.length - 1].rows as LeaseRow[]) : []);
    const decided = jobs.map((job): GroupResult<{ decision: AppendDecision; head: StreamHead }> => {
      try {
        const head = heads.get(job.taskId)!;
        const decision = decide(job, head, stored, leases);
        if (decision.kind === 'write') {
          for (const e of decision.envelopes) texts.set(e.event_id, sealer.payloadText(e));
          heads.set(job.taskId, headAfter(head, decision.envelopes));
        }
        return { ok: true, value: { decision, head } };
      } catch (error) {
        return { ok: false, error };
      }
    });
    const envelopes = decided.flatMap((d) =>
      d.ok && d.value.decision.kind === 'write' ? d.value.decision.envelopes : [],
    );
    const text = (e: UnpositionedEvent) => texts.get(e.event_id)!;
    let positions: Map<string, number>;
    if (envelopes.length === 0) {
      positions = new Map();
      await client.query('COMMIT');
    } else if (this.projections.length === 0) {
      const results = (await client.query(
        `${keysInsertSql(keys.created)}${insertLiteralSql(envelopes, text)}; ${NOTIFY_AND_COMMIT}`,
      )) as unknown as QueryResult<InsertedRow>[];
      positions = positionsOf(results[keyInserts(keys.created)].rows);
    } else {
      positions = await this.write(client, envelopes, sealer, text);
      // after the projections, which may seal copies under keys made in this group too
      if (keys.created.length > 0) await client.query(keysInsertSql(keys.created));
      await client.query(NOTIFY_AND_COMMIT);
    }
    return decided.map((d): GroupResult<AppendOutcome> =>
      d.ok ? { ok: true, value: outcomeOf(d.value.decision, positions, d.value.head) } : d,
    );
  }

  private async commitOneByOne(client: PoolClient, jobs: readonly AppendJob[]) {
    await client.query(`BEGIN; ${APPEND_LOCK_SQL}`);
    const outcomes: GroupResult<AppendOutcome>[] = [];
    for (const job of jobs) {
      await client.query('SAVEPOINT append');
      try {
        const supplied = job.batch.filter((e) => e.id_supplied).map((e) => e.event_id);
        const head = (await loadHeads(client, [job.taskId])).get(job.taskId)!;
        const decision = decide(
          job,
          head,
          await loadByIds(client, supplied),
          await loadLeases(client, job.options.lease ? [job.taskId] : []),
        );
        const positions = await this.write(client, decision.kind === 'write' ? decision.envelopes : []);
        await client.query('RELEASE SAVEPOINT append');
        outcomes.push({ ok: true, value: outcomeOf(decision, positions, head) });
      } catch (error) {
        await client.query('ROLLBACK TO SAVEPOINT append');
        outcomes.push({ ok: false, error: archivedTaskError(job.taskId, error) });
      }
    }
    const written = outcomes.some((o) => o.ok && o.value.kind === 'written');
    await client.query(written ? NOTIFY_AND_COMMIT : 'COMMIT');
    return outcomes;
  }

  /**
   * Insert the envelopes in one statement and run the projections over them; their positions by event id.
   * Payloads as `payloadText` stores them, or as a sealer over the keys read here does.
   */
  private async write(
    client: PoolClient,
    envelopes: readonly UnpositionedEvent[],
    groupSealer?: PayloadSealer,
    payloadText?: (e: UnpositionedEvent) => string,
  ): Promise<Map<string, number>> {
    if (envelopes.length === 0) return new Map();
    const loaded = groupSealer ? null : await this.loadedSealer(client, envelopes);
    const sealer = groupSealer ?? loaded!.sealer;
    const text = payloadText ?? ((e: UnpositionedEvent) => sealer.payloadText(e));
    const inserted = await client.query<InsertedRow>(
      insertParametersSql(envelopes.length),
      envelopes.flatMap((e) => eventRowValues(e, text)),
    );
    const positions = positionsOf(inserted.rows);
    const written = envelopes.map((e) => ({ ...e, position: positions.get(e.event_id)! }) as RuntimeEvent);
    for (const projection of this.projections) await projection.apply(client, written, sealer);
    // the keys this append made (its events', its read models' copies'), in its transaction
    if (loaded && loaded.created.length > 0) await client.query(keysInsertSql(loaded.created));
    return positions;
  }

  /**
   * The sealer of envelopes appended one by one (the group's fallback): keys read under the append
   * lock the transaction holds; those it creates are for the caller to insert (`created`).
   */
  private async loadedSealer(
    client: PoolClient,
    envelopes: readonly UnpositionedEvent[],
  ): Promise<{ sealer: PayloadSealer; created: CreatedKey[] }> {
    const { rows } = await client.query<KeyRow>(keyRowsSql('$1', '$2'), [
      [...new Set(envelopes.map((e) => e.session_id))],
      owningStreams(envelopes),
    ]);
    const keys = groupKeys(rows, this.seal);
    return { sealer: new PayloadSealer(keys, this.seal), created: keys.created };
  }

  override onCommitted(listener: CommitListener): () => void {
    const remove = super.onCommitted(listener);
    if (++this.listeners === 1) this.startListening();
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      remove();
      if (--this.listeners === 0) this.stopListening();
    };
  }

  /** Serialised: listeners get positions in order, each once. */
  private publish(events: readonly RuntimeEvent[]): Promise<void> {
    const run = this.publishing.then(async () => {
      const fresh = events.filter((e) => e.position > this.published);
      if (fresh.length === 0) return;
      // everything below our positions committed before us (the append lock): publish what we have not
      if (this.listeners > 0) await this.publishBelow(fresh[0].position);
      this.emitCommitted(fresh);
      this.published = fresh[fresh.length - 1].position;
    });
    this.publishing = run.catch((err: unknown) =>
      process.emitWarning(`PgEventStore could not publish committed events: ${(err as Error).message}`),
    );
    return this.publishing;
  }

  /** Read and publish what other instances committed after the last published position and before `before`. */
  private async publishBelow(before: number): Promise<void> {
    for (;;) {
      const { rows } = await this.pool.query<EventRow>(
        'SELECT * FROM events WHERE position > $1 AND position < $2 ORDER BY position LIMIT $3',
        [this.published, before, PUBLISH_PAGE],
      );
      if (rows.length === 0) return;
      const page = await openedPg(this.pool, rows.map(rowToEvent));
      this.emitCommitted(page);
      this.published = page[page.length - 1].position;
    }
  }

  /** What other instances committed: everything after the last published position. */
  private catchUp(): Promise<void> {
    if (this.listeners === 0 || this.closed) return Promise.resolve();
    const run = this.publishing.then(() => this.publishBelow(Number.MAX_SAFE_INTEGER));
    this.publishing = run.catch(() => undefined);
    return this.publishing;
  }

  private startListening(): void {
    // a first listener hears from now on: what was committed before is for it to read
    const start = this.publishing.then(async () => {
      const { rows } = await this.pool.query<{ position: number | null }>(
        'SELECT max(position) AS position FROM events',
      );
      this.published = Math.max(this.published, rows[0]?.position ?? 0);
    });
    this.publishing = start.catch(() => undefined);
    const listenStart = this.publishing.finally(() => {
      if (this.listenStart === listenStart) this.listenStart = null;
    });
    this.listenStart = listenStart;
    if (this.pollMs > 0) {
      this.pollTimer = setInterval(() => {
        void this.catchUp();
        void this.connectListener();
      }, this.pollMs);
      this.pollTimer.unref();
    }
    void this.connectListener();
  }

  /** A pool client kept for LISTEN; after it drops, the poll reconnects it. */
  private async connectListener(): Promise<void> {
    if (this.listenClient || this.connecting || this.listeners === 0 || this.closed) return;
    this.connecting = true;
    try {
      const client = await this.pool.connect();
      if (this.listeners === 0 || this.closed) return client.release();
      client.on('notification', () => void this.catchUp());
      client.on('error', () => {
        if (this.listenClient !== client) return;
        this.listenClient = null;
        client.release(true);
      });
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      this.listenClient = client;
      // what was committed while nobody listened
      void this.catchUp();
    } catch (err) {
      process.emitWarning(`PgEventStore cannot LISTEN, polling: ${(err as Error).message}`);
    } finally {
      this.connecting = false;
    }
  }

  private stopListening(): void {
    if (this.pollTimer) clearInterval(this.pollTimer);
    this.pollTimer = null;
    const client = this.listenClient;
    this.listenClient = null;
    if (!client) return;
    client.removeAllListeners('notification');
    this.unlistening = client.query(`UNLISTEN ${EVENTS_CHANNEL}`).then(
      () => client.release(),
      () => client.release(true),
    );
  }

  override async sealCopy(owner: KeyOwner, text: string): Promise<string> {
    if (!this.seal || isSystemSession(owner.session_id)) return text;
    const { rows } = await this.pool.query<KeyRow>(keyRowsSql('$1', '$2'), [
      [owner.session_id],
      owner.stream_id === null ? [] : [owner.stream_id],
    ]);
    const state = rulesOver(rows).existingKey(owner);
    // an owner without a key wrote its events in clear (before sealing was on): its copies follow
    // them; an erased owner's copy is made from its erased events and holds no content
    return state && state !== 'erased' ? sealText(text, state, owner) : text;
  }

  override async openCopy(text: string): Promise<string | null> {
    return (await this.openCopies([text]))[0];
  }

  /** One read of the keys for all the texts' owners. */
  override openCopies(texts: readonly (string | null)[]): Promise<(string | null)[]> {
    return openCopiesPg(this.pool, texts);
  }

  /** The live table's rows, or, for an archived task (none live), its segment's. */
  async readStream(taskId: string, options: ReadStreamOptions = {}): Promise<RuntimeEvent[]> {
    const rows = await streamRows(this.handle.db, taskId, options);
    return openedPg(
      this.pool,
      (rows.length > 0 ? rows : await this.archive.stream(taskId, options)).map(rowToEvent),
    );
  }

  override archivedRanges(afterPosition: number, through?: number, limit?: number): Promise<ArchivedRange[]> {
    return this.archive.ranges(afterPosition, through, limit);
  }

  override archivedRangesOf(segmentIds: readonly string[]): Promise<ArchivedRange[]> {
    return this.archive.rangesOf(segmentIds);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RuntimeEvent[]> {
    const live = await allQuery(this.handle.db, options).selectAll().execute();
    return openedPg(
      this.pool,
      (options.archived ? await this.archive.mergeInto(live, options) : live).map(rowToEvent),
    );
  }

  override readHeads(options: ReadAllOptions = {}): Promise<EventHead[]> {
    // archived events have no stored heads to read apart: read whole, then cut
    return options.archived ? super.readHeads(options) : eventHeads(this.handle.db, options);
  }

  /**
   * Index reads: the highest position (live, or archived: archived events keep theirs), and the
   * count every append keeps (event_log_head), which archiving leaves as it is (the events are
   * still the log's, in its archive).
   */
  async head(): Promise<StoreHead> {
    const { rows } = await this.pool.query<{ position: string | null; event_count: string }>(
      `SELECT GREATEST((SELECT max(position) FROM events), (SELECT max(last_position) FROM archive_segments)) AS position,
              (SELECT event_count FROM event_log_head WHERE id = 1) AS event_count`,
    );
    return { position: Number(rows[0].position ?? 0), event_count: Number(rows[0].event_count) };
  }

  async streamVersion(taskId: string): Promise<number> {
    return (await streamVersion(this.handle.db, taskId)) || this.archive.version(taskId);
  }

  /** Stops listening; the pool belongs to whoever opened it. */
  async close(): Promise<void> {
    this.closed = true;
    this.stopListening();
    await Promise.all([this.publishing, this.unlistening]);
  }
}

/**
 * One append checked against its task's lease (fencing first: a process that
 * lost the task learns that before anything else), then against its stream's
 * head and the stored events with its ids.
 */
function decide(
  job: AppendJob,
  head: StreamHead,
  stored: ReadonlyMap<string, EventRow>,
  leases: ReadonlyMap<string, LeaseToken>,
): AppendDecision {
  const { taskId, batch, options } = job;
  checkLeaseHeld(taskId, options.lease, leases.get(taskId) ?? null);
  return decideAppend(taskId, batch, options.expected, head, (id) => stored.get(id));
}

/** The head of a stream after `envelopes` were appended to it, for the next append of the group. */
const headAfter = (head: StreamHead, envelopes: readonly UnpositionedEvent[]): StreamHead => ({
  version: envelopes[envelopes.length - 1].sequence,
  session_id: head.session_id ?? envelopes[0].session_id,
  last_type: envelopes[envelopes.length - 1].type,
});

/** `head`: the stream's head the decision was made on */
const outcomeOf = (
  d: AppendDecision,
  positions: ReadonlyMap<string, number>,
  head: StreamHead,
): AppendOutcome =>
  d.kind === 'retry'
    ? d
    : {
        kind: 'written',
        events: d.envelopes.map((e) => ({ ...e, position: positions.get(e.event_id)! }) as RuntimeEvent),
        head: headAfter(head, d.envelopes),
      };

interface HeadRow {
  task_id: string;
  version: number | null;
  session_id: string | null;
  last_type: string | null;
}
interface LeaseRow {
  task_id: string;
  owner: string;
  epoch: number;
}
interface InsertedRow {
  event_id: string;
  position: number;
}

/** The heads of the streams in `taskIds`, an SQL text[] expression. */
const headsSql = (taskIds: string): string =>
  `SELECT t.task_id,
          (SELECT max(sequence) FROM events e WHERE e.task_id = t.task_id) AS version,
          (SELECT session_id FROM events e WHERE e.task_id = t.task_id AND e.sequence = 1) AS session_id,
          (SELECT type FROM events e WHERE e.task_id = t.task_id ORDER BY e.sequence DESC LIMIT 1) AS last_type
   FROM unnest(${taskIds}) AS t(task_id)`;

const byIdsSql = (eventIds: string): string => `SELECT * FROM events WHERE event_id = ANY(${eventIds})`;

/**
 * True while every stream stands at its head in `heads` (its last event is the head's, or it has none
 * for an empty head) and no owner of the envelopes is erased (PayloadSealer without sealing:
 * checkWritable), on the safe side: any erased key row of their sessions or streams holds the insert
 * back, and the reads decide. Migration CreateAppendGuard.
 */
const appendGuardSql = (
  heads: ReadonlyMap<string, KnownHead>,
  envelopes: readonly UnpositionedEvent[],
): string => {
  const owners = envelopes.filter((e) => !isSystemSession(e.session_id)).map(keyOwnerOf);
  const versions = `ARRAY[${[...heads.values()].map((h) => h.version).join(', ')}]::integer[]`;
  return `append_guard(${[
    textArray([...heads.keys()]),
    versions,
    textArray([...heads.values()].map((h) => h.last_event_id)),
    textArray([...new Set(owners.map((o) => o.session_id))]),
    textArray([...new Set(owners.flatMap((o) => (o.stream_id === null ? [] : [o.stream_id])))]),
  ].join(', ')})`;
};

/** True while `lease` is `taskId`'s current one (checkLeaseHeld); the rows are locked by leasesSql before. */
const leaseGuardSql = (taskId: string, lease: LeaseToken): string =>
  `EXISTS (SELECT 1 FROM task_leases WHERE task_id = ${literal(taskId)}
           AND owner = ${literal(lease.owner)} AND epoch = ${literal(lease.epoch)})`;

/** insertSql of the envelopes (payloads in clear), written only while `guard` holds: all rows or none. */
const guardedInsertSql = (envelopes: readonly UnpositionedEvent[], guard: string): string =>
  insertSql(
    envelopes.length,
    `SELECT * FROM (VALUES ${envelopes
      .map((e) => `(${eventRowValues(e).map(literal).join(', ')})`)
      .join(', ')}) AS v WHERE ${guard}`,
    true,
  );

/**
 * Fencing reads the leases FOR SHARE: the rows stay locked until the
 * transaction ends, so a claim that takes a task over waits for this append,
 * which never commits after a takeover it did not see.
 */
const leasesSql = (taskIds: string): string =>
  `SELECT task_id, owner, epoch FROM task_leases WHERE task_id = ANY(${taskIds}) FOR SHARE`;

const headsOf = (rows: readonly HeadRow[]): Map<string, StreamHead> =>
  new Map(
    rows.map((r) => [
      r.task_id,
      { version: r.version ?? 0, session_id: r.session_id, last_type: r.last_type },
    ]),
  );
const storedOf = (rows: readonly EventRow[]): Map<string, EventRow> =>
  new Map(rows.map((r) => [r.event_id, r]));
const leasesOf = (rows: readonly LeaseRow[]): Map<string, LeaseToken> =>
  new Map(rows.map((r) => [r.task_id, { owner: r.owner, epoch: r.epoch }]));
const positionsOf = (rows: readonly InsertedRow[]): Map<string, number> =>
  new Map(rows.map((r) => [r.event_id, r.position]));

async function loadHeads(client: PoolClient, taskIds: readonly string[]): Promise<Map<string, StreamHead>> {
  return headsOf((await client.query<HeadRow>(headsSql('$1::text[]'), [taskIds])).rows);
}

async function loadByIds(client: PoolClient, eventIds: readonly string[]): Promise<Map<string, EventRow>> {
  if (eventIds.length === 0) return new Map();
  return storedOf((await client.query<EventRow>(byIdsSql('$1'), [eventIds])).rows);
}

async function loadLeases(client: PoolClient, taskIds: readonly string[]): Promise<Map<string, LeaseToken>> {
  if (taskIds.length === 0) return new Map();
  return leasesOf((await client.query<LeaseRow>(leasesSql('$1'), [taskIds])).rows);
}

/**
 * A segment's events whose tasks are still archived (a restored task's are live again), in position
 * order, and which of those tasks are catalogued (recorded in the catalog, not the live table).
 */
async function archivedEventsOf(
  client: PoolClient,
  content: SegmentContent,
): Promise<{ events: RuntimeEvent[]; catalogued: string[] }> {
  const { rows } = await client.query<{ task_id: string; catalogued: boolean }>(
    `SELECT task_id, false AS catalogued FROM archived_tasks WHERE segment_id = $1
     UNION ALL SELECT task_id, true FROM catalog_archived_tasks c WHERE segment_id = $1
       AND NOT EXISTS (SELECT 1 FROM archived_tasks a WHERE a.task_id = c.task_id)`,
    [content.segment_id],
  );
  const archived = new Set(rows.map((r) => r.task_id));
  return {
    events: await openedPg(client, content.events.filter((e) => archived.has(e.task_id)).map(rowToEvent)),
    catalogued: rows.filter((r) => r.catalogued).map((r) => r.task_id),
  };
}

/**
 * Empty a projection and refold the whole log into it in one transaction that
 * holds the append lock, so appends wait and nobody sees it half built.
 * Returns the number of events folded. `before`/`after` run in the same
 * transaction (a rebuild report compares the two pictures).
 */
export async function rebuildPgProjection(
  pool: Pool,
  projection: PgInlineProjection,
  around: { before?: (c: PoolClient) => Promise<void>; after?: (c: PoolClient) => Promise<void> } = {},
  { sealCopies = false }: { sealCopies?: boolean } = {},
): Promise<number> {
  // the page's owners' keys (created for those without one when sealing), for the read model's copies
  const applyPage = async (client: PoolClient, events: readonly RuntimeEvent[]) => {
    const { rows } = await client.query<KeyRow>(keyRowsSql('$1', '$2'), [
      [...new Set(events.map((e) => e.session_id))],
      owningStreams(events),
    ]);
    const keys = groupKeys(rows, sealCopies);
    await projection.apply(client, events, new PayloadSealer(keys, sealCopies));
    if (keys.created.length > 0) await client.query(keysInsertSql(keys.created));
  };
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(APPEND_LOCK_SQL);
    await around.before?.(client);
    await projection.reset(client);
    let count = 0;
    for (let after = 0; ;) {
      const { rows } = await client.query<EventRow>(
        'SELECT * FROM events WHERE position > $1 ORDER BY position LIMIT $2',
        [after, REBUILD_PAGE],
      );
      if (rows.length === 0) break;
      const events = await openedPg(client, rows.map(rowToEvent));
      await applyPage(client, events);
      count += events.length;
      after = events[events.length - 1].position;
    }
    // archived tasks are the log's too: their streams are folded from their segments
    const { rows: segments } = await client.query<{ segment_id: string; sha256: string; content: Buffer }>(
      'SELECT segment_id, sha256, content FROM archive_segments ORDER BY first_position',
    );
    for (const segment of segments) {
      const { events, catalogued } = await archivedEventsOf(
        client,
        decodeSegment(segment.content, segment.sha256, segment.segment_id),
      );
      await applyPage(client, events);
      if (catalogued.length > 0) await projection.dropCatalogued?.(client, catalogued);
      count += events.length;
    }
    await around.after?.(client);
    await client.query('COMMIT');
    return count;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}
