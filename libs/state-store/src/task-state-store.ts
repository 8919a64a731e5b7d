import {
  ERASED_VALUE,
  SEALED_KEY,
  AcceptCheck,
  Budgets,
  ExecutionDirective,
  IdempotencyConflictError,
  RuntimeEvent,
  StopReason,
  TaskStatus,
  TaskUsage,
  ValidationError,
} from '@runledger/contracts';
import {
  CatalogReader,
  CopySealer,
  Database,
  FoldedState,
  InlineProjection,
  ProjectionModule,
  SqliteHandle,
  rebuildProjection,
  sqliteCatalog,
} from '@runledger/event-store';
import { isPostgres } from '@runledger/migrations';
import type BetterSqlite3 from 'better-sqlite3';
import { Kysely, sql } from 'kysely';
import { ModelUsageRow, modelUsageOf, modelUsageUpsert } from './model-usage';
import { StateStoreDatabase, StateStoreTables, TaskRow, TasksTable } from './schema';
import { PendingRequest, TaskState, evolve } from './task-state';
import { OpenCopies, TaskRowCodec, openTaskRows, openedAsStored } from './sealed-task-rows';

export interface ListTasksOptions {
  status?: TaskStatus;
  session_id?: string;
  /** a substring of the input, case-insensitive for ASCII letters */
  q?: string;
  /** 1..500, default 50 */
  limit?: number;
  /** opaque, from a previous page's next_cursor */
  cursor?: string;
}

export interface RebuildReport {
  /** events folded */
  events: number;
  /** task rows after the rebuild */
  tasks: number;
  /** task ids whose row the rebuild changed, created or removed */
  changed: string[];
}

export interface TaskPage {
  items: TaskState[];
  /** null on the last page */
  next_cursor: string | null;
}

export type { TaskRow };

export const TASK_COLUMNS = [
  'task_id',
  'status',
  'session_id',
  'input',
  'last_directive',
  'pending_requests',
  'stop_reason',
  'stop_detail',
  'result',
  'usage',
  'rounds',
  'last_seq',
  'idempotency_key',
  'request_hash',
  'accept_checks',
  'budgets',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof TasksTable)[];

export { PERSONAL_TASK_COLUMNS } from './sealed-task-rows';

export const stateToRow = (s: TaskState): TaskRow => ({
  task_id: s.task_id,
  status: s.status,
  session_id: s.session_id,
  input: s.input,
  last_directive: s.last_directive === null ? null : JSON.stringify(s.last_directive),
  pending_requests: JSON.stringify(s.pending_requests),
  stop_reason: s.stop_reason,
  stop_detail: s.stop_detail,
  result: s.result,
  usage: JSON.stringify(s.usage),
  rounds: s.rounds,
  last_seq: s.last_seq,
  idempotency_key: s.idempotency_key,
  request_hash: s.request_hash,
  accept_checks: JSON.stringify(s.accept_checks),
  budgets: JSON.stringify(s.budgets),
  created_at: s.created_at,
  updated_at: s.updated_at,
});

export const rowToState = (r: TaskRow): TaskState => ({
  task_id: r.task_id,
  status: r.status as TaskStatus,
  session_id: r.session_id,
  input: r.input,
  last_directive: r.last_directive === null ? null : (JSON.parse(r.last_directive) as ExecutionDirective),
  pending_requests: JSON.parse(r.pending_requests) as PendingRequest[],
  stop_reason: r.stop_reason as StopReason | null,
  stop_detail: r.stop_detail,
  result: r.result,
  usage: JSON.parse(r.usage) as TaskUsage,
  rounds: r.rounds,
  last_seq: r.last_seq,
  idempotency_key: r.idempotency_key,
  request_hash: r.request_hash,
  accept_checks: JSON.parse(r.accept_checks) as AcceptCheck[],
  budgets: JSON.parse(r.budgets) as Budgets,
  created_at: r.created_at,
  updated_at: r.updated_at,
});

/** An append's events cut into runs of one task each, in order (a batch is one task; a rebuild page is many). */
export function taskRuns(events: readonly RuntimeEvent[]): { task_id: string; events: RuntimeEvent[] }[] {
  const runs: { task_id: string; events: RuntimeEvent[] }[] = [];
  for (const e of events) {
    const last = runs[runs.length - 1];
    if (last?.task_id === e.task_id) last.events.push(e);
    else runs.push({ task_id: e.task_id, events: [e] });
  }
  return runs;
}

/**
 * A task's row after a run of its events, folded with `evolve` onto the row
 * before it; null when the stream is not a task: only a stream opened by
 * TASK_RECEIVED is one (system streams such as system:memory are not listed
 * or resumed).
 */
export function foldRun(before: TaskRow | undefined, events: readonly RuntimeEvent[]): TaskState | null {
  let current = before ? rowToState(before) : null;
  for (const e of events) {
    if (current === null && e.type !== 'TASK_RECEIVED') continue;
    current = evolve(current, e);
  }
  return current;
}

/**
 * The writer's fold of a run (AppendOptions.folded), when it is the fold of `stored` through the run: the
 * row stands at the sequence the writer folded from (or, for a task's first events, there is no row
 * and the run opens the task), and the fold ends where the run does. Otherwise undefined: the row is
 * read, folded and written as for any append.
 */
function writersFold(
  folded: FoldedState | undefined,
  stored: TaskRow | undefined,
  run: { task_id: string; events: readonly RuntimeEvent[] },
): TaskState | undefined {
  const state = folded?.state as TaskState | null | undefined;
  if (!folded || !state) return undefined;
  const last = run.events[run.events.length - 1];
  const from = stored
    ? stored.last_seq === folded.base
    : folded.base === 0 && run.events[0].type === 'TASK_RECEIVED';
  return from && state.task_id === run.task_id && state.last_seq === last.sequence ? state : undefined;
}

/** Columns whose value the new row changes: an UPDATE of only these rewrites only the indexes they are in. */
export const changedColumns = (before: TaskRow, row: TaskRow): (keyof TaskRow)[] =>
  TASK_COLUMNS.filter((c) => c !== 'task_id' && row[c] !== before[c]);

/** The pattern characters of LIKE taken literally: a search for `50%` finds "50%", not "50 anything". */
const escapeLike = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

const encodeCursor = (s: Pick<TaskState, 'created_at' | 'task_id'>): string =>
  Buffer.from(JSON.stringify([s.created_at, s.task_id])).toString('base64url');

function decodeCursor(cursor: string): [string, string] {
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(value) && value.length === 2 && value.every((v) => typeof v === 'string'))
      return value as [string, string];
  } catch {
    // fall through to the same error as a well-formed but wrong cursor
  }
  throw new ValidationError('invalid cursor', { field: 'cursor' });
}

interface Statements {
  get: BetterSqlite3.Statement<[string], TaskRow>;
  insert: BetterSqlite3.Statement<TaskRow[]>;
  /** UPDATE of exactly the changed columns, by column list: an index is only rewritten when its columns change */
  updates: Map<string, BetterSqlite3.Statement<TaskRow[]>>;
  /** adds a run's model answers to `model_usage` */
  usage: BetterSqlite3.Statement<ModelUsageRow[]>;
}

/**
 * The `tasks` read model: a projection of the event log written inside the
 * append transaction (so it never drifts), and its queries. The queries are
 * kysely and serve every dialect; each storage driver supplies the projection
 * (SqliteTaskStateStore here, PgTaskStateStore in ./postgres), both folding
 * with the same pure `evolve` and writing `stateToRow`.
 */
export abstract class TaskStateStore {
  readonly name = 'tasks';
  protected readonly db: Kysely<StateStoreDatabase>;

  /**
   * `openCopies`: how the rows' personal columns are opened for readers (EventStore.openCopies: they
   * are sealed under their session's key when erasure is on).
   */
  constructor(
    db: Kysely<Database>,
    /** the archive's catalog: rows of tasks archived long ago, out of the live table (read after it) */
    readonly catalog: CatalogReader,
    private readonly openCopies: OpenCopies = openedAsStored,
  ) {
    this.db = db.withTables<StateStoreTables>();
  }

  /** The catalog's reads, or null while nothing is catalogued. */
  private catalogDb(): Kysely<CatalogStateDatabase> | null {
    return (this.catalog.db() as Kysely<CatalogStateDatabase> | null) ?? null;
  }

  /** Closes the catalog's connection (SQLite), when one was opened. */
  close(): Promise<void> {
    return this.catalog.close();
  }

  /** Drop every row and refold every stream from the log. Returns the number of events folded. */
  abstract rebuild(): Promise<number>;

  /**
   * rebuild(), and which rows the refold changed: a task whose row differed
   * from the fold of its log (drift), appeared or disappeared. One write
   * transaction, so an append cannot land between the two pictures.
   */
  abstract rebuildReport(): Promise<RebuildReport>;

  /** The task's row: live, or (archived long ago) from the catalog. */
  get(taskId: string): Promise<TaskState | null> {
    return this.oneTask('task_id', taskId);
  }

  findByIdempotencyKey(key: string): Promise<TaskState | null> {
    return this.oneTask('idempotency_key', key);
  }

  /** The task whose `column` is `value`: its live row, or its catalogued one. */
  private async oneTask(column: 'task_id' | 'idempotency_key', value: string): Promise<TaskState | null> {
    const row =
      (await this.db.selectFrom('tasks').selectAll().where(column, '=', value).executeTakeFirst()) ??
      (await this.catalogDb()
        ?.selectFrom('catalog_tasks')
        .selectAll()
        .where(column, '=', value)
        .executeTakeFirst());
    return row ? rowToState((await openTaskRows([row], this.openCopies))[0]) : null;
  }

  /** A session's tasks and their statuses, live and catalogued (the live row wins), by task id. */
  async sessionStatuses(sessionId: string): Promise<Array<{ task_id: string; status: TaskStatus }>> {
    const live = await this.db
      .selectFrom('tasks')
      .select(['task_id', 'status'])
      .where('session_id', '=', sessionId)
      .execute();
    const catalogued =
      (await this.catalogDb()
        ?.selectFrom('catalog_tasks')
        .select(['task_id', 'status'])
        .where('session_id', '=', sessionId)
        .execute()) ?? [];
    const byId = new Map([...catalogued, ...live].map((r) => [r.task_id, r.status as TaskStatus]));
    return [...byId]
      .map(([task_id, status]) => ({ task_id, status }))
      .sort((a, b) => (a.task_id < b.task_id ? -1 : a.task_id > b.task_id ? 1 : 0));
  }

  /** Tasks per status, live and catalogued (a task in both while a move is under way counts once). */
  async countByStatus(): Promise<Partial<Record<TaskStatus, number>>> {
    const counts: Partial<Record<TaskStatus, number>> = {};
    const add = (rows: { status: string; n: number | string | bigint }[]) => {
      for (const r of rows)
        counts[r.status as TaskStatus] = (counts[r.status as TaskStatus] ?? 0) + Number(r.n);
    };
    add(
      await this.db
        .selectFrom('tasks')
        .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy('status')
        .execute(),
    );
    const catalog = this.catalogDb();
    if (catalog)
      add(
        await catalog
          .selectFrom('catalog_tasks as c')
          .select(['c.status', (eb) => eb.fn.countAll<number>().as('n')])
          .where(({ not, exists, selectFrom }) =>
            not(exists(selectFrom('tasks as t').select('t.task_id').whereRef('t.task_id', '=', 'c.task_id'))),
          )
          .groupBy('c.status')
          .execute(),
      );
    return counts;
  }

  /**
   * Newest first, keyset-paginated on (created_at, task_id). With `q`, SQL keeps the rows whose
   * input matches in clear or is sealed, and the sealed ones are matched once opened, SCAN_PAGE rows
   * at a time until the page is full: with erasure on, a search opens every row it passes over.
   */
  async list(options: ListTasksOptions = {}): Promise<TaskPage> {
    const limit = options.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > 500)
      throw new ValidationError('limit must be an integer from 1 to 500', { field: 'limit' });
    let after = options.cursor === undefined ? null : decodeCursor(options.cursor);
    const found: TaskRow[] = [];
    if (options.q === undefined) found.push(...(await this.page(options, after, limit + 1)));
    else {
      const needle = foldAscii(options.q);
      for (;;) {
        const rows = await this.page(options, after, SCAN_PAGE);
        // only the input is opened to match; the rest of a row only once it is on the page
        const inputs = await this.openCopies(rows.map((r) => r.input));
        for (let i = 0; i < rows.length; i++)
          if (foldAscii(inputs[i] ?? ERASED_VALUE).includes(needle) && found.push(rows[i]) > limit) break;
        if (found.length > limit || rows.length < SCAN_PAGE) break;
        after = [rows[rows.length - 1].created_at, rows[rows.length - 1].task_id];
      }
    }
    const opened = options.q === undefined ? found : await openTaskRows(found, this.openCopies);
    const items = opened.slice(0, limit).map(rowToState);
    return { items, next_cursor: found.length > limit ? encodeCursor(items[items.length - 1]) : null };
  }

  /**
   * The ids whose row differs between two pictures of the table, compared as readers get them: a
   * sealed column is sealed again with a fresh IV by a rebuild, so its stored text always differs.
   */
  protected async changedRows(before: Map<string, TaskRow>, after: Map<string, TaskRow>): Promise<string[]> {
    const ids = [...new Set([...before.keys(), ...after.keys()])];
    const differ = ids.filter((id) => JSON.stringify(before.get(id)) !== JSON.stringify(after.get(id)));
    const both = differ.filter((id) => before.has(id) && after.has(id));
    const opened = await openTaskRows(
      both.flatMap((id) => [before.get(id)!, after.get(id)!]),
      this.openCopies,
    );
    const same = new Set(
      both.filter((_, i) => JSON.stringify(opened[2 * i]) === JSON.stringify(opened[2 * i + 1])),
    );
    return differ.filter((id) => !same.has(id)).sort();
  }

  /**
   * Up to `limit` rows after the cursor `after`, newest first, as stored: the live table's and the
   * catalog's (a task in both while a move is under way: the live row), whose pages, sorted on the
   * same key, merge into the page of the two.
   */
  private async page(
    options: ListTasksOptions,
    after: [string, string] | null,
    limit: number,
  ): Promise<TaskRow[]> {
    // the catalog's rows have the live table's columns: one query serves both (typed as the live one's)
    const read = (db: Kysely<StateStoreDatabase>, table: 'tasks' | 'catalog_tasks') =>
      db
        .selectFrom(table as 'tasks')
        .selectAll()
        .$if(table === 'catalog_tasks', (q) =>
          q.where(sql<boolean>`NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = catalog_tasks.task_id)`),
        )
        .$if(options.status !== undefined, (q) => q.where('status', '=', options.status!))
        .$if(options.session_id !== undefined, (q) => q.where('session_id', '=', options.session_id!))
        .$if(options.q !== undefined, (q) => q.where(this.inputMayContain(options.q!)))
        .$if(after !== null, (q) =>
          q.where((eb) =>
            eb.or([
              eb('created_at', '<', after![0]),
              eb.and([eb('created_at', '=', after![0]), eb('task_id', '<', after![1])]),
            ]),
          ),
        )
        .orderBy('created_at', 'desc')
        .orderBy('task_id', 'desc')
        .limit(limit)
        .execute();
    let rows = await read(this.db, 'tasks');
    const catalog = this.catalogDb();
    if (catalog) {
      const catalogued = await read(catalog as unknown as Kysely<StateStoreDatabase>, 'catalog_tasks');
      if (catalogued.length > 0) rows = [...rows, ...catalogued].sort(newestFirst).slice(0, limit);
    }
    return options.q === undefined ? openTaskRows(rows, this.openCopies) : rows;
  }

  /**
   * `input` contains `text` in clear, ASCII letters folded (SQLite's LIKE; PostgreSQL's LIKE is made
   * to match), or is sealed (its match is decided once opened).
   */
  private inputMayContain(text: string) {
    const pattern = `%${escapeLike(text)}%`;
    const sealed = sql<boolean>`substr(input, 1, ${SEALED_PREFIX.length}) = ${SEALED_PREFIX}`;
    return isPostgres(this.db)
      ? sql<boolean>`(translate(input, ${ASCII_UPPER}, ${ASCII_LOWER}) LIKE translate(${pattern}, ${ASCII_UPPER}, ${ASCII_LOWER}) ESCAPE '\\' OR ${sealed})`
      : sql<boolean>`(input LIKE ${pattern} ESCAPE '\\' OR ${sealed})`;
  }
}

/** The order of task lists: created_at, then task_id, descending. */
const newestFirst = (a: TaskRow, b: TaskRow): number =>
  a.created_at !== b.created_at
    ? a.created_at < b.created_at
      ? 1
      : -1
    : a.task_id === b.task_id
      ? 0
      : a.task_id < b.task_id
        ? 1
        : -1;

/** The live tables and the catalog's task rows (see CatalogReader). */
type CatalogStateDatabase = StateStoreDatabase & { catalog_tasks: TasksTable };

/** Rows a `q` search reads and opens at a time. */
const SCAN_PAGE = 500;
/** How a sealed copy's text begins (sealText). */
const SEALED_PREFIX = `{"${SEALED_KEY}":`;
/** ASCII letters in lower case, as SQLite's LIKE compares them. */
const foldAscii = (text: string): string => text.replace(/[A-Z]+/g, (m) => m.toLowerCase());

const ASCII_UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const ASCII_LOWER = 'abcdefghijklmnopqrstuvwxyz';

/**
 * The task-state projection on SQLite: prepared statements on the raw
 * connection, inside the SqliteEventStore's append transaction. Register it
 * with `new SqliteEventStore(handle, { projections: [taskStates] })`.
 */
export class SqliteTaskStateStore extends TaskStateStore implements InlineProjection {
  private statements: Statements | null = null;
  private readonly codec = new TaskRowCodec();
  private readonly sealCopies: boolean;

  /** `sealCopies`: a rebuild seals the personal columns (erasure on), as the appends' projection does */
  constructor(
    private readonly handle: SqliteHandle,
    options: { openCopies?: OpenCopies; sealCopies?: boolean } = {},
  ) {
    super(handle.db, sqliteCatalog(handle.raw.name), options.openCopies);
    this.sealCopies = options.sealCopies === true;
  }

  apply(
    raw: BetterSqlite3.Database,
    events: readonly RuntimeEvent[],
    copies?: CopySealer,
    folded?: FoldedState,
  ): void {
    const stmt = this.prepare(raw);
    for (const run of taskRuns(events)) {
      const stored = stmt.get.get(run.task_id);
      const before = stored && { stored, clear: this.codec.open(stored, copies) };
      const state = writersFold(folded, stored, run) ?? foldRun(before?.clear, run.events);
      if (state) this.write(raw, stmt, stored, this.codec.seal(stateToRow(state), copies, before), state);
    }
    for (const row of modelUsageOf(events)) stmt.usage.run(row);
  }

  reset(raw: BetterSqlite3.Database): void {
    raw.prepare('DELETE FROM tasks').run();
    raw.prepare('DELETE FROM model_usage').run();
  }

  /** A rebuild folds catalogued tasks for their usage; their rows stay the catalog's. */
  dropCatalogued(raw: BetterSqlite3.Database, taskIds: readonly string[]): void {
    const drop = raw.prepare('DELETE FROM tasks WHERE task_id = ?');
    for (const id of taskIds) drop.run(id);
  }

  /** Drop every row and refold every stream from the log. Returns the number of events folded. */
  async rebuild(): Promise<number> {
    return rebuildProjection(this.handle.raw, this, { sealCopies: this.sealCopies });
  }

  /**
   * rebuild(), and which rows the refold changed: a task whose row differed
   * from the fold of its log (drift), appeared or disappeared. One write
   * transaction, so an append cannot land between the two pictures.
   */
  async rebuildReport(): Promise<RebuildReport> {
    const raw = this.handle.raw;
    const rows = raw.prepare<[], TaskRow>('SELECT * FROM tasks');
    const picture = () => new Map(rows.all().map((r) => [r.task_id, r]));
    const { events, before, after } = raw
      .transaction(() => {
        const before = picture();
        const events = rebuildProjection(raw, this, { sealCopies: this.sealCopies });
        return { events, before, after: picture() };
      })
      .immediate();
    return { events, tasks: after.size, changed: await this.changedRows(before, after) };
  }

  private prepare(raw: BetterSqlite3.Database): Statements {
    this.statements ??= {
      get: raw.prepare('SELECT * FROM tasks WHERE task_id = ?'),
      insert: raw.prepare(
        `INSERT INTO tasks (${TASK_COLUMNS.join(', ')}) VALUES (${TASK_COLUMNS.map((c) => `@${c}`).join(', ')})`,
      ),
      updates: new Map(),
      usage: raw.prepare(modelUsageUpsert((c) => `@${c}`)),
    };
    return this.statements;
  }

  private write(
    raw: BetterSqlite3.Database,
    stmt: Statements,
    before: TaskRow | undefined,
    row: TaskRow,
    state: TaskState,
  ): void {
    try {
      if (!before) {
        stmt.insert.run(row);
        return;
      }
      const changed = changedColumns(before, row);
      if (changed.length === 0) return;
      const key = changed.join(',');
      let update = stmt.updates.get(key);
      if (!update) {
        update = raw.prepare(
          `UPDATE tasks SET ${changed.map((c) => `${c} = @${c}`).join(', ')} WHERE task_id = @task_id`,
        );
        stmt.updates.set(key, update);
      }
      update.run(row);
    } catch (err) {
      // the unique index is the race-free guard: two submissions with one key cannot both create a task
      if (
        (err as { code?: string }).code === 'SQLITE_CONSTRAINT_UNIQUE' &&
        /idempotency_key/.test((err as Error).message)
      ) {
        throw new IdempotencyConflictError(`idempotency key already used by another task`, {
          idempotency_key: state.idempotency_key,
        });
      }
      throw err;
    }
  }
}

/** The tasks projection as the writer thread builds it on its own connection (see TASK_STATES_PROJECTION). */
export function createTaskStateProjection(handle: SqliteHandle): InlineProjection {
  return new SqliteTaskStateStore(handle);
}

/** Where the writer thread finds the tasks projection: this module, built by createTaskStateProjection. */
export const TASK_STATES_PROJECTION: ProjectionModule = {
  module: __filename,
  exportName: createTaskStateProjection.name,
};
