import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import type BetterSqlite3 from 'better-sqlite3';
import type { Worker } from 'node:worker_threads';
import { startModuleWorker } from '../module-worker';
import { RuntimeEvent, currentSchemaVersion } from '@runledger/contracts';
import { GroupResult } from '../group-committer';
import { InlineProjection } from '../inline-projection';
import {
  GroupOutcome,
  GroupRequest,
  SqliteAppendTransaction,
  SqliteSealing,
  isBusy,
  withBusyRetry,
} from './append-transaction';
import { SqliteHandle, SqliteSynchronous } from './open-sqlite';
import { ThreadError, fromThreadError } from './thread-errors';
import { keyFileOpenedHere } from '../sealing/sqlite-data-keys';

/** Runs one group of appends as one transaction: on the caller's connection, or in the writer thread. */
export interface AppendWriter {
  run(requests: readonly GroupRequest[]): Promise<GroupResult<GroupOutcome>[]>;
  /** resolves once the writer can commit (the thread opened its connection); rejects if it cannot */
  ready(): Promise<void>;
  /** how busy the writer's own thread has been (cumulative); null when it commits on the caller's */
  threadUse(): EventLoopUtilization | null;
  close(): Promise<void>;
}

/** The write transaction on the main thread's own connection: its fsync blocks the event loop. */
export class InlineAppendWriter implements AppendWriter {
  private readonly transaction: SqliteAppendTransaction;

  constructor(
    handle: Pick<SqliteHandle, 'raw' | 'appendSynchronous'>,
    projections: readonly InlineProjection[],
    private readonly busyRetryMs: number,
    sealing: SqliteSealing | null = null,
  ) {
    this.transaction = new SqliteAppendTransaction(
      handle.raw,
      projections,
      handle.appendSynchronous,
      sealing,
    );
  }

  run(requests: readonly GroupRequest[]): Promise<GroupResult<GroupOutcome>[]> {
    return withBusyRetry(() => this.transaction.run(requests), this.busyRetryMs);
  }

  async ready(): Promise<void> {}

  threadUse(): null {
    return null;
  }

  async close(): Promise<void> {
    this.transaction.close();
  }
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

/** The projection `spec` names, built over `handle` (the connection that will apply it). */
export function loadProjection(spec: ProjectionModule, handle: SqliteHandle): InlineProjection {
  // the module path is data (the projection's own __filename), so this is a runtime require by design
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const make = (require(spec.module) as Record<string, unknown>)[spec.exportName];
  if (typeof make !== 'function')
    throw new Error(`projection module ${spec.module} has no function export ${spec.exportName}`);
  return (make as (h: SqliteHandle) => InlineProjection)(handle);
}

export interface WriterThreadOptions {
  path: string;
  synchronous: SqliteSynchronous;
  busyTimeoutMs: number;
  busyRetryMs: number;
  projections: readonly ProjectionModule[];
  /** the key store the thread opens (with the key-encryption key its data keys are wrapped with) */
  sealing?: { keysPath: string; seal: boolean; keyEncryptionKey?: Uint8Array };
}

/** What the main thread sends the writer thread. */
export type ToWriter =
  | {
      type: 'run';
      id: number;
      requests: readonly GroupRequest[];
      /** a connection of the sending thread opened the key file (SqliteAppendTransaction.run) */
      keyFileSeen: boolean;
    }
  | { type: 'close' };

/**
 * A written append as the thread reports it: only what the transaction
 * assigned to each event. The main thread still holds the batch it sent and
 * puts the events back together from it, so payloads never travel back.
 */
export interface WrittenReply {
  kind: 'written';
  /** per event of the batch, in order */
  assigned: Array<
    Pick<RuntimeEvent, 'session_id' | 'sequence' | 'correlation_id' | 'created_at' | 'position'>
  >;
}

export type OutcomeReply = Exclude<GroupOutcome, { kind: 'written' }> | WrittenReply;

/** The thread's side: a written outcome without what the sender already has. */
export function toReply(outcome: GroupOutcome): OutcomeReply {
  if (outcome.kind !== 'written') return outcome;
  return {
    kind: 'written',
    assigned: outcome.events.map(({ session_id, sequence, correlation_id, created_at, position }) => ({
      session_id,
      sequence,
      correlation_id,
      created_at,
      position,
    })),
  };
}

/** The main thread's side: the stored events from the request's batch and what the thread assigned. */
export function fromReply(request: GroupRequest, reply: OutcomeReply): GroupOutcome {
  if (reply.kind !== 'written') return reply;
  if (request.kind === 'statement') throw new Error('the writer thread answered a statement with events');
  return {
    kind: 'written',
    events: reply.assigned.map((a, i) => {
      const e = request.batch[i];
      return {
        event_id: e.event_id,
        task_id: request.taskId,
        session_id: a.session_id,
        sequence: a.sequence,
        type: e.type,
        payload: e.payload,
        causation_id: e.causation_id,
        correlation_id: a.correlation_id,
        created_at: a.created_at,
        schema_version: currentSchemaVersion(e.type),
        position: a.position,
      } as RuntimeEvent;
    }),
  };
}

/** What the writer thread answers. */
export type FromWriter =
  | { type: 'ready' }
  | { type: 'init_failed'; error: ThreadError }
  | {
      type: 'done';
      id: number;
      results: Array<{ ok: true; value: OutcomeReply } | { ok: false; error: ThreadError }>;
    }
  | { type: 'failed'; id: number; error: ThreadError }
  | { type: 'closed' };

/** A promise with its settle functions; a rejection nobody awaits is not reported as unhandled. */
function settleable(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

interface PendingGroup {
  requests: readonly GroupRequest[];
  resolve: (r: GroupResult<GroupOutcome>[]) => void;
  reject: (e: unknown) => void;
}

/**
 * The write connection in a worker thread (append-writer-thread): the
 * transaction, its fsync and busy retries run there, so they never block the
 * event loop. Groups go one at a time; typed errors come back rebuilt as the
 * same classes.
 */
export class ThreadAppendWriter implements AppendWriter {
  private readonly worker: Worker;
  private readonly pending = new Map<number, PendingGroup>();
  private nextId = 1;
  /** set once the thread failed or stopped: every later group fails with it */
  private broken: Error | null = null;
  private closing: Promise<void> | null = null;
  private readonly started = settleable();
  private readonly keysPath: string | null;

  constructor(options: WriterThreadOptions) {
    this.keysPath = options.sealing?.keysPath ?? null;
    this.worker = startModuleWorker(__dirname, 'append-writer-thread', options);
    // idle, the thread does not keep the process alive; while a group is out it does
    this.worker.unref();
    this.worker.on('message', (m: FromWriter) => this.receive(m));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) =>
      this.fail(new Error(`the SQLite writer thread exited with code ${code}`)),
    );
  }

  run(requests: readonly GroupRequest[]): Promise<GroupResult<GroupOutcome>[]> {
    if (this.broken) return Promise.reject(this.broken);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { requests, resolve, reject });
      if (this.pending.size === 1) this.worker.ref();
      const keyFileSeen = this.keysPath !== null && keyFileOpenedHere(this.keysPath);
      this.worker.postMessage({ type: 'run', id, requests, keyFileSeen } satisfies ToWriter);
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
        return this.started.resolve();
      case 'closed':
        return;
      case 'init_failed':
        return this.fail(fromThreadError(m.error));
      case 'done':
        return this.settle(m.id, (p) =>
          p.resolve(
            m.results.map((r, i) =>
              r.ok
                ? { ok: true, value: fromReply(p.requests[i], r.value) }
                : { ok: false, error: fromThreadError(r.error) },
            ),
          ),
        );
      case 'failed':
        return this.settle(m.id, (p) => p.reject(fromThreadError(m.error)));
    }
  }

  private settle(id: number, how: (p: PendingGroup) => void): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
    how(p);
  }

  ready(): Promise<void> {
    return this.started.promise;
  }

  threadUse(): EventLoopUtilization | null {
    return this.broken ? null : this.worker.performance.eventLoopUtilization();
  }

  private fail(err: Error): void {
    this.started.reject(err);
    this.broken ??= err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}

/** How many distinct tasks a group appends to (routed statements ride with anyone's). */
const appendersIn = (requests: readonly GroupRequest[]): number =>
  new Set(requests.flatMap((r) => (r.kind === 'statement' ? [] : [r.taskId]))).size;

/**
 * How long the writer thread keeps the commits after the last group that held
 * appends of more than one task.
 */
export const CONCURRENCY_HOLD_MS = 1000;

/**
 * The writer thread while appenders are concurrent, the caller's own
 * connection for a lone one. A group appending to more than one task sends
 * the groups of the next `holdMs` to the thread, whose fsyncs then never
 * block the event loop that serves the other callers. A lone appender (one
 * task, and the writes riding with it) commits inline: it waits for its own
 * commit anyway, and a round trip to the thread (and the thread's idle WAL
 * checkpoints, each a sync of its own) only add to that wait. The inline
 * attempt never waits for a lock: with busy_timeout 0 for its BEGIN, a file
 * another connection is writing sends the group to the thread, which waits
 * there. Groups go one at a time (GroupCommitter), so the two connections
 * never write at once on this store's behalf.
 */
export class AdaptiveAppendWriter implements AppendWriter {
  private readonly transaction: SqliteAppendTransaction;
  private readonly busyTimeout: { none: string; restore: string };
  private concurrentUntil = 0;
  private onThread = 0;

  constructor(
    private readonly raw: BetterSqlite3.Database,
    projections: readonly InlineProjection[],
    appendSynchronous: SqliteSynchronous,
    private readonly thread: AppendWriter,
    private readonly holdMs = CONCURRENCY_HOLD_MS,
    sealing: SqliteSealing | null = null,
  ) {
    this.transaction = new SqliteAppendTransaction(raw, projections, appendSynchronous, sealing);
    const busyTimeoutMs = Number(raw.pragma('busy_timeout', { simple: true }));
    this.busyTimeout = {
      none: 'PRAGMA busy_timeout = 0',
      restore: `PRAGMA busy_timeout = ${Math.trunc(busyTimeoutMs)}`,
    };
  }

  run(requests: readonly GroupRequest[]): Promise<GroupResult<GroupOutcome>[]> {
    const now = performance.now();
    if (appendersIn(requests) > 1) this.concurrentUntil = now + this.holdMs;
    if (now < this.concurrentUntil) return this.onTheThread(requests);
    let results: GroupResult<GroupOutcome>[];
    this.raw.exec(this.busyTimeout.none);
    try {
      results = this.transaction.run(requests);
    } catch (err) {
      // nothing of the group was written: the thread waits for the lock instead of the event loop
      if (isBusy(err)) return this.onTheThread(requests);
      return Promise.reject(err);
    } finally {
      this.raw.exec(this.busyTimeout.restore);
    }
    return Promise.resolve(results);
  }

  private onTheThread(requests: readonly GroupRequest[]): Promise<GroupResult<GroupOutcome>[]> {
    this.onThread++;
    return this.thread.run(requests);
  }

  /** groups the thread committed so far (the others were committed inline) */
  threadGroups(): number {
    return this.onThread;
  }

  ready(): Promise<void> {
    return this.thread.ready();
  }

  threadUse(): EventLoopUtilization | null {
    return this.thread.threadUse();
  }

  close(): Promise<void> {
    this.transaction.close();
    return this.thread.close();
  }
}
