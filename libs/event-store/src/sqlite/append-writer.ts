import { extname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { GroupResult } from '../group-committer';
import { InlineProjection } from '../inline-projection';
import { AppendOutcome, AppendRequest, SqliteAppendTransaction, withBusyRetry } from './append-transaction';
import { SqliteHandle, SqliteSynchronous } from './open-sqlite';
import { ThreadError, fromThreadError } from './thread-errors';

/** Runs one group of appends as one transaction: on the caller's connection, or in the writer thread. */
export interface AppendWriter {
  run(requests: readonly AppendRequest[]): Promise<GroupResult<AppendOutcome>[]>;
  close(): Promise<void>;
}

/** The write transaction on the main thread's own connection: its fsync blocks the event loop. */
export class InlineAppendWriter implements AppendWriter {
  private readonly transaction: SqliteAppendTransaction;

  constructor(
    handle: Pick<SqliteHandle, 'raw' | 'appendSynchronous'>,
    projections: readonly InlineProjection[],
    private readonly busyRetryMs: number,
  ) {
    this.transaction = new SqliteAppendTransaction(handle.raw, projections, handle.appendSynchronous);
  }

  run(requests: readonly AppendRequest[]): Promise<GroupResult<AppendOutcome>[]> {
    return withBusyRetry(() => this.transaction.run(requests), this.busyRetryMs);
  }

  async close(): Promise<void> {}
}

/**
 * A projection the writer thread builds for itself, since objects do not
 * cross threads: `require(module)[exportName](handle)` returns it, with
 * `handle` the thread's own connection (a SqliteHandle).
 */
export interface ProjectionModule {
  /** absolute path of the module (its __filename: .ts under jest, .js in the build) */
  module: string;
  exportName: string;
}

export interface WriterThreadOptions {
  path: string;
  synchronous: SqliteSynchronous;
  busyTimeoutMs: number;
  busyRetryMs: number;
  projections: readonly ProjectionModule[];
}

/** What the main thread sends the writer thread. */
export type ToWriter = { type: 'run'; id: number; requests: readonly AppendRequest[] } | { type: 'close' };

/** What the writer thread answers. */
export type FromWriter =
  | { type: 'ready' }
  | { type: 'init_failed'; error: ThreadError }
  | {
      type: 'done';
      id: number;
      results: Array<{ ok: true; value: AppendOutcome } | { ok: false; error: ThreadError }>;
    }
  | { type: 'failed'; id: number; error: ThreadError }
  | { type: 'closed' };

/**
 * Whether this code runs from its TypeScript sources (jest, swc-node) rather
 * than the build: a writer thread then compiles its own copy of the modules it
 * loads, which costs seconds per start on a loaded machine.
 */
export const runningFromSources = (): boolean => extname(__filename) === '.ts';

/**
 * Loads the thread's entry module; TypeScript sources (jest, the benchmarks)
 * need the swc require hook in the thread too, the build's .js does not.
 */
const BOOTSTRAP = `
const { workerData } = require('node:worker_threads');
if (workerData.register) require(workerData.register);
require(workerData.entry);
`;

/**
 * The write connection in a worker thread (append-writer-thread): the
 * transaction, its fsync and busy retries run there, so they never block the
 * event loop. Groups go one at a time; typed errors come back rebuilt as the
 * same classes.
 */
export class ThreadAppendWriter implements AppendWriter {
  private readonly worker: Worker;
  private readonly pending = new Map<
    number,
    { resolve: (r: GroupResult<AppendOutcome>[]) => void; reject: (e: unknown) => void }
  >();
  private nextId = 1;
  /** set once the thread failed or stopped: every later group fails with it */
  private broken: Error | null = null;
  private closing: Promise<void> | null = null;

  constructor(options: WriterThreadOptions) {
    const entry = join(__dirname, `append-writer-thread${extname(__filename)}`);
    const register = runningFromSources() ? require.resolve('@swc-node/register') : null;
    // Keep swc's native binding loaded on this thread: on Node 20, a process in which the last thread
    // holding it exited crashes (segfault) when another thread loads it again.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    if (register) require('@swc/core');
    this.worker = new Worker(BOOTSTRAP, { eval: true, workerData: { entry, register, options } });
    // idle, the thread does not keep the process alive; while a group is out it does
    this.worker.unref();
    this.worker.on('message', (m: FromWriter) => this.receive(m));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) =>
      this.fail(new Error(`the SQLite writer thread exited with code ${code}`)),
    );
  }

  run(requests: readonly AppendRequest[]): Promise<GroupResult<AppendOutcome>[]> {
    if (this.broken) return Promise.reject(this.broken);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) this.worker.ref();
      this.worker.postMessage({ type: 'run', id, requests } satisfies ToWriter);
    });
  }

  /** Closes the thread's connection and ends the thread; call once nothing is pending. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      if (this.broken) return resolve();
      this.worker.once('exit', () => resolve());
      this.worker.ref();
      this.worker.postMessage({ type: 'close' } satisfies ToWriter);
    });
    return this.closing;
  }

  private receive(m: FromWriter): void {
    switch (m.type) {
      case 'ready':
      case 'closed':
        return;
      case 'init_failed':
        return this.fail(fromThreadError(m.error));
      case 'done':
        return this.settle(m.id, (p) =>
          p.resolve(m.results.map((r) => (r.ok ? r : { ok: false, error: fromThreadError(r.error) }))),
        );
      case 'failed':
        return this.settle(m.id, (p) => p.reject(fromThreadError(m.error)));
    }
  }

  private settle(
    id: number,
    how: (p: { resolve: (r: GroupResult<AppendOutcome>[]) => void; reject: (e: unknown) => void }) => void,
  ): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
    how(p);
  }

  private fail(err: Error): void {
    this.broken ??= err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
