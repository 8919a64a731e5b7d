import type BetterSqlite3 from 'better-sqlite3';
import {
  CompiledQuery,
  DatabaseConnection,
  Driver,
  QueryResult,
  SelectQueryNode,
  SqliteDialect,
  TransactionSettings,
} from 'kysely';

/** What a statement routed off this connection returns: rows for a reader (RETURNING), else the changes. */
export interface RoutedWriteResult {
  rows: unknown[];
  changes?: number;
  lastInsertRowid?: number | bigint;
}

/**
 * Runs one write statement on another connection (the writer thread's). With
 * `ride`, the statement need not commit promptly: it may wait to share the
 * next commit with other writes.
 */
export type WriteRoute = (
  sql: string,
  parameters: readonly unknown[],
  ride: boolean,
) => Promise<RoutedWriteResult>;

/** Prepares SQL on the local connection (cached): what kysely's side of the handle reads with. */
export type PrepareStatement = (sql: string) => BetterSqlite3.Statement;

/**
 * Where the handle's kysely writes go: this connection, until a writer thread
 * takes them. Shared by every kysely instance over the connection, with the
 * turn they take while unrouted.
 */
export class WriteRouting {
  route: WriteRoute | null = null;
  /** settles when the query or transaction holding the connection releases it */
  turn: Promise<void> = Promise.resolve();
}

const toQueryResult = (r: RoutedWriteResult): QueryResult<never> => ({
  rows: r.rows as never[],
  numAffectedRows: r.changes !== undefined ? BigInt(r.changes) : undefined,
  insertId: r.lastInsertRowid !== undefined ? BigInt(r.lastInsertRowid) : undefined,
});

/**
 * The connection as kysely uses it: reads run here; a statement that writes
 * runs here too unless `routing` has a route, then it goes there. With the
 * SQLite writer thread, that keeps this connection from ever taking the write
 * lock, so it never waits in SQLite's busy handler (a sleep that blocks the
 * event loop) while the thread commits, and the thread's BEGIN IMMEDIATE never
 * waits for it either.
 */
class RoutedSqliteConnection implements DatabaseConnection {
  constructor(
    private readonly prepare: PrepareStatement,
    private readonly routing: WriteRouting,
    private readonly ride: boolean,
  ) {}

  executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const { sql, parameters } = compiled;
    const stmt = this.prepare(sql);
    const route = this.routing.route;
    if (route && !stmt.readonly)
      return route(sql, parameters, this.ride).then((r) => toQueryResult(r) as QueryResult<R>);
    if (stmt.reader) return Promise.resolve({ rows: stmt.all(parameters) as R[] });
    const { changes, lastInsertRowid } = stmt.run(parameters);
    return Promise.resolve({
      rows: [],
      numAffectedRows: BigInt(changes),
      insertId: BigInt(lastInsertRowid),
    });
  }

  async *streamQuery<R>(compiled: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    if (!SelectQueryNode.is(compiled.query)) throw new Error('SQLite streams select queries only');
    for (const row of this.prepare(compiled.sql).iterate(compiled.parameters)) yield { rows: [row as R] };
  }
}

/**
 * kysely's SQLite driver, over a RoutedSqliteConnection. Unrouted, one query
 * or transaction at a time across every driver on the connection (a
 * transaction owns it). Routed, no transaction can start and each query is
 * synchronous here or sent to the route, so queries take no turn: a read does
 * not wait behind a routed write's round trip.
 */
class RoutedSqliteDriver implements Driver {
  private readonly connection: RoutedSqliteConnection;
  /** handed out while routed; releasing it frees no turn */
  private readonly sharedConnection: RoutedSqliteConnection;
  private released: (() => void) | null = null;

  constructor(
    prepare: PrepareStatement,
    private readonly close: () => void,
    private readonly routing: WriteRouting,
    ride: boolean,
  ) {
    this.connection = new RoutedSqliteConnection(prepare, routing, ride);
    this.sharedConnection = new RoutedSqliteConnection(prepare, routing, ride);
  }

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    if (this.routing.route) return this.sharedConnection;
    let release!: () => void;
    const previous = this.routing.turn;
    this.routing.turn = new Promise<void>((r) => (release = r));
    await previous;
    this.released = release;
    return this.connection;
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    if (connection === this.sharedConnection) return;
    const release = this.released;
    this.released = null;
    release?.();
  }

  async beginTransaction(connection: DatabaseConnection, _settings: TransactionSettings): Promise<void> {
    // a transaction's statements would run on two connections: refused rather than silently not atomic
    if (this.routing.route)
      throw new Error(
        'no kysely transaction on a SQLite handle whose writes go to the writer thread; write through the event store',
      );
    await connection.executeQuery(CompiledQuery.raw('begin'));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async destroy(): Promise<void> {
    this.close();
  }
}

/**
 * SQLite for kysely whose writes can be routed to another connection
 * (WriteRouting); with `ride`, routed writes ride in the next commit.
 */
export class RoutedSqliteDialect extends SqliteDialect {
  constructor(
    private readonly prepare: PrepareStatement,
    private readonly closeDatabase: () => void,
    private readonly routing: WriteRouting,
    private readonly ride = false,
  ) {
    super({ database: { prepare, close: closeDatabase } as never });
  }

  override createDriver(): Driver {
    return new RoutedSqliteDriver(this.prepare, this.closeDatabase, this.routing, this.ride);
  }
}
