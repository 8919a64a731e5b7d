import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
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

/**
 * The probe's answer, kept in the environment: jest loads this module afresh for each test file, and
 * the worker process that runs the files asks the server once (a node child: ~0.3 s of CPU).
 */
const PROBED = 'RUNLEDGER_TEST_PG_PROBED';

/** Checked once per test process, synchronously, so a describe can be skipped at collection time. */
function probe(): { ok: true } | { ok: false; why: string } {
  if (reachable) return reachable;
  const probed = process.env[PROBED];
  if (probed !== undefined)
    return (reachable = probed === `ok ${TEST_PG_URL}` ? { ok: true } : JSON.parse(probed));
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
  process.env[PROBED] = reachable.ok ? `ok ${TEST_PG_URL}` : JSON.stringify(reachable);
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
  /** URL of this file's own database (its migrated fresh schemas are in copies of a template) */
  readonly url: string;
  /** a fresh schema (migrated unless `migrate: false`), with a pool of its own; dispose closes the pool */
  freshSchema(options?: { migrate?: boolean }): Promise<TempPostgres>;
}

export interface TempPostgres {
  /** URL of the database the schema is in */
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
 * Migrated schemas (s1, s2, ...) in the template database. A copy of it (CREATE DATABASE ... TEMPLATE)
 * measured 0.3-0.7 s with 8 (an empty database: 0.3-0.4 s) against ~0.3 s to migrate one schema
 * on a quiet machine and 0.5-1 s on a busy one, where PostgreSQL competes for the CPU.
 */
const PREMIGRATED_SCHEMAS = 8;
/** session advisory lock (on the admin database) held while a template is built */
const TEMPLATE_LOCK = 7_263_501_148;

/** The migrations' sources, so a changed or added migration gets a template of its own. */
function migrationsFingerprint(): string {
  const dir = join(__dirname, '..', '..', 'migrations');
  const hash = createHash('sha256').update(String(PREMIGRATED_SCHEMAS));
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
    .sort())
    hash.update(file).update(readFileSync(join(dir, file)));
  return hash.digest('hex').slice(0, 16);
}

let templateName: Promise<string> | undefined;

/**
 * A database holding PREMIGRATED_SCHEMAS schemas migrated by migrateToLatest, for this state of the
 * migrations; built once (by the first test process that needs it, under an advisory lock, so
 * parallel workers and runs wait for one build) and kept for later runs. Building one drops the
 * templates of other states (a run still on one of them builds its own again, see takePremigrated).
 */
function premigratedTemplate(): Promise<string> {
  templateName ??= admin(TEST_PG_URL, async (c) => {
    const name = `rl_tmpl_${migrationsFingerprint()}`;
    await c.query('SELECT pg_advisory_lock($1)', [TEMPLATE_LOCK]);
    try {
      const found = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
      if (found.rowCount) return name;
      // a build killed half-way leaves its database under the building name: never a template
      const building = `${name}_building`;
      await c.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
      await c.query(`CREATE DATABASE ${building}`);
      for (let i = 1; i <= PREMIGRATED_SCHEMAS; i++) {
        const handle = openPostgres({
          url: withDatabase(TEST_PG_URL, building),
          schema: `s${i}`,
          maxConnections: 1,
        });
        try {
          await createSchemaIfMissing(handle);
          await migrateToLatest(handle.db);
        } finally {
          await handle.close();
        }
      }
      // nobody connects to a template: a connected session would make CREATE DATABASE ... TEMPLATE fail
      await c.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
      await c.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`);
      const stale = await c.query<{ datname: string }>(
        "SELECT datname FROM pg_database WHERE datname LIKE 'rl\\_tmpl\\_%' AND datname <> $1",
        [name],
      );
      for (const { datname } of stale.rows) await c.query(`DROP DATABASE IF EXISTS ${datname}`);
      return name;
    } finally {
      await c.query('SELECT pg_advisory_unlock($1)', [TEMPLATE_LOCK]);
    }
  });
  return templateName;
}

/**
 * A database of this test file's own (created before its tests, dropped after),
 * so files run in parallel without meeting; each test takes a schema in it.
 * `freshSchema()` (migrated) hands out the schemas of copies of premigratedTemplate, made when
 * needed and dropped with the file's database; `freshSchema({ migrate: false })` is a new, empty
 * schema in the file's database (for what a boot on an empty schema does).
 * A disposed schema stays until the database goes: a test's own DROP SCHEMA of
 * some 30 tables cost more than the test itself. Call inside a describePostgres body.
 */
export function useTestPostgres(prefix = 'rl_test'): TestPostgres {
  const database = `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = withDatabase(TEST_PG_URL, database);
  const copies: string[] = [];
  let emptySchemas = 0;
  let premigratedTaken = PREMIGRATED_SCHEMAS;
  let taking = Promise.resolve();
  /** the next migrated schema, in the last copy, or in a new copy when that one is used up */
  const takePremigrated = async (): Promise<{ url: string; schema: string }> => {
    if (premigratedTaken === PREMIGRATED_SCHEMAS) {
      const copy = `${database}_m${copies.length + 1}`;
      try {
        await admin(TEST_PG_URL, async (c) =>
          c.query(`CREATE DATABASE ${copy} TEMPLATE ${await premigratedTemplate()}`),
        );
      } catch (err) {
        // 3D000: the template is gone (a run on other migrations dropped it): build it again
        if ((err as { code?: string }).code !== '3D000') throw err;
        templateName = undefined;
        await admin(TEST_PG_URL, async (c) =>
          c.query(`CREATE DATABASE ${copy} TEMPLATE ${await premigratedTemplate()}`),
        );
      }
      copies.push(copy);
      premigratedTaken = 0;
    }
    return { url: withDatabase(TEST_PG_URL, copies[copies.length - 1]), schema: `s${++premigratedTaken}` };
  };
  beforeAll(() => admin(TEST_PG_URL, (c) => c.query(`CREATE DATABASE ${database}`)));
  afterAll(() =>
    admin(TEST_PG_URL, async (c) => {
      for (const db of [database, ...copies]) await c.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`);
    }),
  );
  return {
    url,
    async freshSchema({ migrate = true } = {}) {
      let at: { url: string; schema: string };
      if (migrate) {
        const next = taking.then(takePremigrated);
        taking = next.then(
          () => undefined,
          () => undefined,
        );
        at = await next;
      } else at = { url, schema: `s${++emptySchemas}` };
      const handle = openPostgres({ url: at.url, schema: at.schema, maxConnections: 5 });
      if (!migrate) await createSchemaIfMissing(handle);
      return {
        ...at,
        handle,
        async dispose() {
          await handle.close();
        },
      };
    },
  };
}
