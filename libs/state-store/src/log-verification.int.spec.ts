import { execFileSync } from 'node:child_process';
import { sql } from 'kysely';
import { TEST_PG_URL, describePostgres, useTestPostgres } from '@runledger/testing';
import { verifyLog } from './log-verification';
import { createTempPgStorage, describeEachStorage } from './testing/temp-storage';
import { loadGoldenLog, readGoldenLog } from './testing/golden-logs';
import { openPostgres } from '@runledger/event-store';

const golden = readGoldenLog('log-v1');
const someTask = Object.keys(golden.states)[0];

describeEachStorage('verifyLog', (open) => {
  it('passes a log whose projection was folded from it, counting every stream and event', async () => {
    const { storage, dispose } = await open();
    try {
      await loadGoldenLog(storage.db, golden);
      await storage.taskStates.rebuild();
      expect(await verifyLog(storage.db)).toEqual({
        ok: true,
        streams: Object.keys(golden.states).length,
        tasks: Object.keys(golden.states).length,
        events: golden.rows.length,
        problems: [],
      });
    } finally {
      await dispose();
    }
  });

  it('names a task whose row differs from its fold, a row without events, and a gap in a stream', async () => {
    const { storage, dispose } = await open();
    try {
      await loadGoldenLog(storage.db, golden);
      await storage.taskStates.rebuild();
      const db = storage.db.withTables<{
        tasks: { task_id: string; result: string | null; rounds: number };
      }>();
      await db.updateTable('tasks').set({ rounds: 99 }).where('task_id', '=', someTask).execute();
      await sql`INSERT INTO tasks SELECT 'task_orphan', status, session_id, input, last_directive, pending_requests, stop_reason, stop_detail, result, usage, rounds, last_seq, NULL, request_hash, accept_checks, budgets, created_at, updated_at FROM tasks WHERE task_id = ${someTask}`.execute(
        storage.db,
      );
      const last = golden.rows.filter((r) => r.task_id === someTask).length;
      await storage.db
        .insertInto('events')
        .values({
          ...golden.rows.filter((r) => r.task_id === someTask)[1],
          position: undefined,
          event_id: 'evt_after_a_gap',
          sequence: last + 2,
        } as never)
        .execute();
      const report = await verifyLog(storage.db);
      expect(report.ok).toBe(false);
      expect(report.problems.map((p) => p.problem)).toEqual(
        expect.arrayContaining([
          expect.stringMatching(
            new RegExp(`^${someTask}: its row differs from the fold of its events in .*rounds`),
          ),
          `${someTask}: sequence ${last + 2} where ${last + 1} was due`,
          'task_orphan: a task row without a single event',
        ]),
      );
    } finally {
      await dispose();
    }
  });
});

describePostgres('a pg_dump of the schema, restored into another database, verifies', () => {
  const pg = useTestPostgres('rl_dump');
  it('pg_dump --schema | psql into a fresh database: every task folds to its row there', async () => {
    const { storage, path: source, dispose } = await createTempPgStorage(pg);
    const target = new URL(source);
    target.pathname = `${target.pathname}_copy`;
    const admin = openPostgres({ url: TEST_PG_URL, maxConnections: 1 });
    try {
      await loadGoldenLog(storage.db, golden);
      await storage.taskStates.rebuild();
      await sql.raw(`CREATE DATABASE ${target.pathname.slice(1)}`).execute(admin.db);
      const dump = execFileSync('pg_dump', ['--no-owner', `--schema=${storage.schema}`, source], {
        maxBuffer: 64 << 20,
      });
      execFileSync('psql', ['--quiet', '--set=ON_ERROR_STOP=1', target.toString()], { input: dump });
      const restored = openPostgres({ url: target.toString(), schema: storage.schema, maxConnections: 2 });
      try {
        const report = await verifyLog(restored.db);
        expect(report).toMatchObject({
          ok: true,
          tasks: Object.keys(golden.states).length,
          events: golden.rows.length,
        });
      } finally {
        await restored.close();
      }
    } finally {
      await dispose();
      await sql.raw(`DROP DATABASE IF EXISTS ${target.pathname.slice(1)} WITH (FORCE)`).execute(admin.db);
      await admin.close();
    }
  });
});
