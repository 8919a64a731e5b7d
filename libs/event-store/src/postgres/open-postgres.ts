import { ValidationError } from '@runledger/contracts';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Pool, PoolConfig, types } from 'pg';
import { Database } from '../sqlite/schema';

export interface OpenPostgresOptions {
  /** `postgres://user:password@host:port/database` */
  url: string;
  /** tables live in this schema (created if missing); default `public` */
  schema?: string;
  /** pool size; default 10 */
  maxConnections?: number;
  /**
   * How long a session may sit idle inside a transaction before the server
   * ends it (idle_in_transaction_session_timeout); default 5000 ms. An append
   * transaction holds the lock that orders every instance's appends: an
   * instance frozen or cut off inside one costs the others this long, not
   * the length of the pause. Our own transactions send their statements back
   * to back, so only a stalled process comes near it.
   */
  idleInTransactionTimeoutMs?: number;
}

export interface PostgresHandle<DB = Database> {
  db: Kysely<DB>;
  /** `db` itself: each PostgreSQL statement commits on its own (SqliteHandle.lazyDb differs) */
  lazyDb: Kysely<DB>;
  pool: Pool;
  /** the schema every connection of the pool works in */
  schema: string;
  close(): Promise<void>;
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** A `postgres://` or `postgresql://` URL: what selects the PostgreSQL driver. */
export const isPostgresUrl = (value: string): boolean => /^postgres(ql)?:\/\//i.test(value);

/**
 * bigint (positions, epochs, times in ms) as a JS number: every value this
 * schema stores in one stays far below 2^53, and the rows then read the same
 * as from better-sqlite3. Per pool, never pg's global parser.
 */
const INT8_OID = 20;
const typeParsersOf = (pg: typeof import('pg')) => ({
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID && format !== 'binary'
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof types.getTypeParser,
});

/**
 * A pool on a PostgreSQL database, shared by kysely (schema, migrations,
 * reads) and the raw clients of the append path.
 */
export function openPostgres<DB = Database>(options: OpenPostgresOptions): PostgresHandle<DB> {
  if (!isPostgresUrl(options.url))
    throw new ValidationError('a PostgreSQL URL starts with postgres:// or postgresql://', { field: 'url' });
  const schema = options.schema ?? 'public';
  if (!SCHEMA_NAME.test(schema))
    throw new ValidationError(`schema must match ${SCHEMA_NAME}, got ${JSON.stringify(schema)}`, {
      field: 'schema',
    });
  // required here: a process on SQLite (most CLI commands) does not load the PostgreSQL client
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const pg = require('pg') as typeof import('pg');
  const config: PoolConfig = {
    connectionString: options.url,
    max: options.maxConnections ?? 10,
    types: typeParsersOf(pg),
    options: `-c search_path=${schema}`,
    idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 5000,
  };
  const pool = new pg.Pool(config);
  // an idle client losing its server (a restart) must not crash the process; the next query reconnects
  pool.on('error', () => undefined);
  // nor a checked-out one whose session the server ended between two statements (the timeout above):
  // its next query fails, and the client is released as broken
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  let closed = false;
  return {
    db,
    lazyDb: db,
    pool,
    schema,
    async close() {
      if (closed) return;
      closed = true;
      // kysely's destroy ends the pool too
      await db.destroy();
    },
  };
}

/** Create the handle's schema when it does not exist yet (before migrating into it). */
export async function createSchemaIfMissing<DB>(handle: PostgresHandle<DB>): Promise<void> {
  await sql`CREATE SCHEMA IF NOT EXISTS ${sql.id(handle.schema)}`.execute(handle.db);
}
