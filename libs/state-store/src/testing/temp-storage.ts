import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { SqliteStorage, SqliteStorageOptions, createSqliteStorage } from '../storage';

export interface TempStorage {
  storage: SqliteStorage;
  dir: string;
  path: string;
  dispose(): Promise<void>;
}

/** createSqliteStorage on a file in a fresh temp folder, removed by dispose. */
export async function createTempStorage(options: Partial<SqliteStorageOptions> = {}): Promise<TempStorage> {
  const dir = mkdtempSync(join(tmpdir(), 'runledger-state-'));
  const path = join(dir, 'runledger.db');
  const storage = await createSqliteStorage({ path, synchronous: 'NORMAL', ...options });
  return {
    storage,
    dir,
    path,
    async dispose() {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Strip the envelope so prebuilt events (TaskLog) can be appended for real. */
export const asNew = (events: readonly RuntimeEvent[]): NewEvent[] =>
  events.map((e) => ({ type: e.type, payload: e.payload, created_at: e.created_at }) as NewEvent);
