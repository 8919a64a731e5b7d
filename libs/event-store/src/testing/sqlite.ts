import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrateToLatest } from '@runledger/migrations';
import { OpenSqliteOptions, SqliteHandle, openSqlite } from '../sqlite/open-sqlite';

export interface TempSqlite {
  dir: string;
  path: string;
  handle: SqliteHandle;
  /** close the connection and remove the folder */
  dispose(): Promise<void>;
}

/** A migrated SQLite file in a fresh temp folder. */
export async function createTempSqlite(options: Partial<OpenSqliteOptions> = {}): Promise<TempSqlite> {
  const dir = mkdtempSync(join(tmpdir(), 'runledger-'));
  const path = join(dir, 'nested', 'test.db');
  const handle = openSqlite({ path, synchronous: 'NORMAL', ...options });
  await migrateToLatest(handle.db);
  return {
    dir,
    path,
    handle,
    async dispose() {
      await handle.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The conformance suite's `setLease` for a SQLite file: writes the task's current lease row. */
export function sqliteLeaseSetter(handle: SqliteHandle) {
  const upsert = handle.raw.prepare<[string, string, number]>(
    `INSERT INTO task_leases (task_id, owner, epoch, expires_at) VALUES (?, ?, ?, 0)
     ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch`,
  );
  return async (taskId: string, lease: { owner: string; epoch: number }): Promise<void> =>
    void upsert.run(taskId, lease.owner, lease.epoch);
}
