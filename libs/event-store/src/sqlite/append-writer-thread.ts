/**
 * Entry of the SQLite writer thread (see ThreadAppendWriter): opens its own
 * connection to the file, builds the projections it was told about, and runs
 * each group of appends as one transaction, answering with the results.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { InlineProjection } from '../inline-projection';
import { SqliteAppendTransaction, withBusyRetry } from './append-transaction';
import { FromWriter, ToWriter, WriterThreadOptions, toReply } from './append-writer';
import { SqliteHandle, openSqlite } from './open-sqlite';
import { toThreadError } from './thread-errors';

function loadProjection(
  spec: WriterThreadOptions['projections'][number],
  handle: SqliteHandle,
): InlineProjection {
  // the module path is data (the projection's own __filename), so this is a runtime require by design
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const make = (require(spec.module) as Record<string, unknown>)[spec.exportName];
  if (typeof make !== 'function')
    throw new Error(`projection module ${spec.module} has no function export ${spec.exportName}`);
  return (make as (h: SqliteHandle) => InlineProjection)(handle);
}

function main(port: NonNullable<typeof parentPort>, options: WriterThreadOptions): void {
  const post = (m: FromWriter) => port.postMessage(m);
  let handle: SqliteHandle;
  let transaction: SqliteAppendTransaction;
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
    );
  } catch (err) {
    post({ type: 'init_failed', error: toThreadError(err) });
    return;
  }
  port.on('message', (m: ToWriter) => {
    if (m.type === 'close') {
      void handle.close().finally(() => {
        post({ type: 'closed' });
        port.close();
      });
      return;
    }
    withBusyRetry(() => transaction.run(m.requests), options.busyRetryMs).then(
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
  });
  post({ type: 'ready' });
}

if (!isMainThread && parentPort) main(parentPort, (workerData as { options: WriterThreadOptions }).options);
