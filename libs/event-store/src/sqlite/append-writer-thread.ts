/**
 * Entry of the SQLite writer thread (see ThreadAppendWriter): opens its own
 * connection to the file, builds the projections it was told about, and runs
 * each group of appends as one transaction, answering with the results.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type BetterSqlite3 from 'better-sqlite3';
import { SqliteAppendTransaction, withBusyRetry } from './append-transaction';
import { FromWriter, ToWriter, WriterThreadOptions, loadProjection, toReply } from './append-writer';
import { SqliteHandle, openSqlite } from './open-sqlite';
import { SqliteDataKeys } from '../sealing/sqlite-data-keys';
import { KeyWrap } from '../sealing/key-wrap';
import { toThreadError } from './thread-errors';

/**
 * SQLite's own WAL checkpoint runs inside the commit that crosses its page
 * count (1,000): every append of that group waits while megabytes are copied
 * into the database file and synced (3-14 ms here). Whenever the thread has
 * been idle for a moment after a commit, it copies what the WAL holds in a
 * small pass, so under bursty load the automatic one rarely comes due; under
 * load with no pause at all it still bounds the WAL.
 */
const IDLE_CHECKPOINT_MS = 20;

class IdleCheckpoints {
  private timer: NodeJS.Timeout | null = null;
  private dirty = false;

  constructor(private readonly raw: BetterSqlite3.Database) {}

  afterCommit(): void {
    this.dirty = true;
    this.arm();
  }

  /** a message came in: the thread is not idle */
  postpone(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.dirty) this.arm();
  }

  private arm(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.dirty = false;
      try {
        // PASSIVE: copies what no reader still needs, never waits for a lock
        if (this.raw.open) this.raw.pragma('wal_checkpoint(PASSIVE)');
      } catch {
        // busy or closing: the next idle moment (or the automatic checkpoint) does it
      }
    }, IDLE_CHECKPOINT_MS);
    this.timer.unref();
  }
}

function main(port: NonNullable<typeof parentPort>, options: WriterThreadOptions): void {
  const post = (m: FromWriter) => port.postMessage(m);
  let handle: SqliteHandle;
  let transaction: SqliteAppendTransaction;
  const kek = options.sealing?.keyEncryptionKey;
  const keys = options.sealing
    ? new SqliteDataKeys(
        options.sealing.keysPath,
        options.busyTimeoutMs,
        kek ? new KeyWrap(Buffer.from(kek)) : null,
      )
    : null;
  try {
    handle = openSqlite({
      path: options.path,
      synchronous: options.synchronous,
      busyTimeoutMs: options.busyTimeoutMs,
    });
    transaction = new SqliteAppendTransaction(
      handle.raw,
      options.projections.map((p) => loadProjection(p, handle)),
      handle.appendSynchronous,
      keys && { keys, seal: options.sealing!.seal },
    );
  } catch (err) {
    post({ type: 'init_failed', error: toThreadError(err) });
    return;
  }
  const checkpoints = new IdleCheckpoints(handle.raw);
  port.on('message', (m: ToWriter) => {
    checkpoints.postpone();
    if (m.type === 'close') {
      keys?.close();
      transaction.close();
      void handle.close().finally(() => {
        post({ type: 'closed' });
        port.close();
      });
      return;
    }
    withBusyRetry(() => transaction.run(m.requests, m.keyFileSeen), options.busyRetryMs).then(
      (results) =>
        post({
          type: 'done',
          id: m.id,
          results: results.map((r) =>
            r.ok ? { ok: true, value: toReply(r.value) } : { ok: false, error: toThreadError(r.error) },
          ),
        }),
      (err: unknown) => post({ type: 'failed', id: m.id, error: toThreadError(err) }),
    );
    checkpoints.afterCommit();
  });
  post({ type: 'ready' });
}

if (!isMainThread && parentPort) main(parentPort, (workerData as { data: WriterThreadOptions }).data);
