import { statSync } from 'node:fs';
import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import BetterSqlite3 from 'better-sqlite3';
import { TempStorage, createTempStorage } from './testing/temp-storage';

const walBytes = (path: string): number => {
  try {
    return statSync(`${path}-wal`).size;
  } catch {
    return 0;
  }
};

const batchOf = (n: number, from: number): NewEvent[] =>
  Array.from(
    { length: n },
    (_, i) =>
      ({
        type: 'OUTPUT_CHUNK',
        payload: { call_id: 'call_1', index: from + i, delta: 'x'.repeat(120) },
      }) as NewEvent,
  );

/**
 * Appends `total` events in batches while `onBatch` runs between them; returns
 * the largest -wal file size seen.
 */
async function appendWatchingWal(
  tmp: TempStorage,
  total: number,
  batch: number,
  onBatch: () => Promise<void>,
): Promise<number> {
  let maxWal = 0;
  for (let written = 0; written < total; written += batch) {
    const taskId = `t${Math.floor(written / 10_000)}`;
    const version = written % 10_000;
    await tmp.storage.eventStore.append(taskId, batchOf(batch, version), { expected: version });
    await onBatch();
    maxWal = Math.max(maxWal, walBytes(tmp.path));
  }
  return maxWal;
}

describe('long-lived readers do not pin the WAL', () => {
  let tmp: TempStorage;
  beforeEach(async () => {
    // durability is not under test here; without fsyncs the test spends its time on the WAL, not the disk
    tmp = await createTempStorage({ synchronous: 'OFF' });
  });
  afterEach(() => tmp.dispose());

  it('appends 200k events while a subscriber tails them: every event once, in order, and the -wal file stays bounded', async () => {
    const total = 200_000;
    let received = 0;
    let lastPosition = 0;
    let outOfOrder = 0;
    const sub = tmp.storage.bus.subscribe({ after_position: 0 }).subscribe((e: RuntimeEvent) => {
      if (e.position !== lastPosition + 1) outOfOrder++;
      lastPosition = e.position;
      received++;
    });
    // give the tail a turn between batches, as a busy server would
    const maxWal = await appendWatchingWal(tmp, total, 1000, () => new Promise((r) => setImmediate(r)));
    for (let i = 0; received < total && i < 1000; i++) await new Promise((r) => setTimeout(r, 5));
    sub.unsubscribe();

    expect(received).toBe(total);
    expect(outOfOrder).toBe(0);
    // ~60 MB of events went through; auto-checkpoints keep the WAL near 1000 pages (4 MB)
    expect(maxWal).toBeLessThan(16 * 1024 * 1024);
    expect(statSync(tmp.path).size).toBeGreaterThan(32 * 1024 * 1024);
  }, 120_000);

  it('control: a reader holding one read transaction open does pin it, so the bound above is meaningful', async () => {
    const reader = new BetterSqlite3(tmp.path, { readonly: true });
    const pinned = reader.prepare('SELECT position FROM events ORDER BY position').iterate();
    await tmp.storage.eventStore.append('pin', batchOf(1, 0), { expected: 'no_stream' });
    pinned.next();
    try {
      const maxWal = await appendWatchingWal(tmp, 40_000, 1000, async () => undefined);
      expect(maxWal).toBeGreaterThan(16 * 1024 * 1024);
    } finally {
      pinned.return?.();
      reader.close();
    }
  }, 60_000);
});
