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
