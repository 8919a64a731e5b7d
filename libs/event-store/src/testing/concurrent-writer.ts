import { workerData, parentPort } from 'node:worker_threads';
import { ConcurrencyError } from '@runledger/contracts';
import { openSqlite } from '../sqlite/open-sqlite';
import { SqliteEventStore } from '../sqlite/sqlite-event-store';
import { outputChunk } from './events';

/** Worker body for the concurrent-writers test: append with the expected sequence, count rejections. */
interface WriterInput {
  path: string;
  taskId: string;
  writer: number;
  appends: number;
  start: SharedArrayBuffer;
}

async function main(input: WriterInput): Promise<void> {
  const handle = openSqlite({ path: input.path, synchronous: 'NORMAL', busyTimeoutMs: 50 });
  const store = new SqliteEventStore(handle);
  // all writers start together, so their appends really contend
  parentPort!.postMessage({ ready: true });
  Atomics.wait(new Int32Array(input.start), 0, 0);
  const committed: string[] = [];
  const rejected: string[] = [];
  for (let i = 0; i < input.appends; i++) {
    const eventId = `w${input.writer}_a${i}`;
    const expected = await store.streamVersion(input.taskId);
    try {
      await store.append(input.taskId, [outputChunk(i, { event_id: eventId })], { expected });
      committed.push(eventId);
    } catch (err) {
      if (!(err instanceof ConcurrencyError)) throw err;
      rejected.push(eventId);
    }
  }
  await handle.close();
  parentPort!.postMessage({ committed, rejected });
}

main(workerData as WriterInput).catch((err: unknown) => {
  parentPort!.postMessage({ error: String((err as Error)?.stack ?? err) });
});
