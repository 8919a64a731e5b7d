import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrateToLatest } from '@runledger/migrations';
import { Client } from 'pg';
import { PostgresHandle, createSchemaIfMissing, openPostgres } from '@runledger/event-store';

/**
 * The PostgreSQL the PG suites run against: RUNLEDGER_TEST_PG_URL, else the
 * local server a developer machine (and CI) runs. Where it cannot be reached
 * the suites are skipped with one line saying why, unless RUNLEDGER_REQUIRE_PG=1
 * (CI), which turns that into a failing test.
 */
export const TEST_PG_URL =
  process.env.RUNLEDGER_TEST_PG_URL ?? 'postgres://runledger:runledger@localhost:5432/runledger';

const withDatabase = (url: string, database: string): string => {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
};

const redacted = (url: string): string => {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
};

let reachable: { ok: true } | { ok: false; why: string } | undefined;

/** Checked once per test process, synchronously, so a describe can be skipped at collection time. */
function probe(): { ok: true } | { ok: false; why: string } {
  if (reachable) return reachable;
  const script = `const {Client}=require('pg');const c=new Client({connectionString:process.argv[1],connectionTimeoutMillis:3000});
c.connect().then(()=>c.query('select 1')).then(()=>c.end()).then(()=>process.exit(0),e=>{process.stdout.write(String(e.code||e.message));process.exit(1)});`;
  const run = spawnSync(process.execPath, ['-e', script, TEST_PG_URL], { encoding: 'utf8', timeout: 10_000 });
  reachable =
    run.status === 0
      ? { ok: true }
      : {
          ok: false,
          why: `cannot reach ${redacted(TEST_PG_URL)} (${run.stdout || run.error?.message || 'no answer'})`,
        };
  return reachable;
}

/** The skip notice, once per test run (a marker per jest parent process), not once per file. */
function noteSkipped(why: string): void {
  try {
    writeFileSync(join(tmpdir(), `runledger-pg-skipped-${process.ppid}`), why, { flag: 'wx' });
    process.stderr.write(
      `PostgreSQL suites skipped: ${why}; set RUNLEDGER_TEST_PG_URL (RUNLEDGER_REQUIRE_PG=1 makes this a failure)\n`,
    );
  } catch {
    // already said in this run
  }
}

/**
 * `describe` for a suite that needs PostgreSQL: run when it is reachable,
 * skipped with one line when not, failed when RUNLEDGER_REQUIRE_PG=1.
 */
export function describePostgres(name: string, body: () => void): void {
  const state = probe();
  if (state.ok) return describe(name, body);
  if (process.env.RUNLEDGER_REQUIRE_PG === '1') {
    return describe(name, () => {
      it('needs PostgreSQL (RUNLEDGER_REQUIRE_PG=1)', () => {
        throw new Error(`PostgreSQL is required here: ${state.why}`);
      });
    });
  }
  noteSkipped(state.why);
  describe.skip(name, body);
}

export interface TestPostgres {
  /** URL of this file's own database */
  readonly url: string;
  /** a fresh, migrated schema in it, with a pool of its own; dispose drops it */
  freshSchema(options?: { migrate?: boolean }): Promise<TempPostgres>;
}

export interface TempPostgres {
  url: string;
  schema: string;
  handle: PostgresHandle;
  dispose(): Promise<void>;
}

async function admin<T>(url: string, run: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/**
 * A database of this test file's own (created before its tests, dropped after),
 * so files run in parallel without meeting; each test takes a schema in it.
 * A disposed schema stays until the database goes: a test's own DROP SCHEMA of
 * some 30 tables cost more than the test itself. Call inside a describePostgres body.
 */
export function useTestPostgres(prefix = 'rl_test'): TestPostgres {
  const database = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = withDatabase(TEST_PG_URL, database);
  let schemas = 0;
  beforeAll(() => admin(TEST_PG_URL, (c) => c.query(`CREATE DATABASE ${database}`)));
  afterAll(() => admin(TEST_PG_URL, (c) => c.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)));
  return {
    url,
    async freshSchema({ migrate = true } = {}) {
      const schema = `s${++schemas}`;
      const handle = openPostgres({ url, schema, maxConnections: 5 });
      await createSchemaIfMissing(handle);
      if (migrate) await migrateToLatest(handle.db);
      return {
        url,
        schema,
        handle,
        async dispose() {
          await handle.close();
        },
      };
    },
  };
}
