import type { Worker } from 'node:worker_threads';
import { startModuleWorker } from '@runledger/event-store';
import type { ArchiveRun, ArchiveRunner, Archiver, BatchDone } from './archiver';
import type { RetentionPolicy } from './retention-policy';

/** What the archive thread is started with. */
export interface ArchiveThreadData {
  path: string;
  batchTasks?: number;
  /** a task's companion streams are these prefixes followed by its id (a function cannot cross threads) */
  companionPrefixes: string[];
  /** see ArchiverOptions.receiptStreamPrefixes */
  receiptPrefixes?: string[];
  busyTimeoutMs?: number;
}

type RunOptions = Omit<NonNullable<Parameters<Archiver['run']>[2]>, 'pause' | 'stopped'>;

export type ToArchiveThread =
  | { type: 'run'; id: number; policy: RetentionPolicy; now: number; options: RunOptions; pauses: boolean }
  | { type: 'resume'; id: number; stop: boolean }
  | { type: 'reclaim'; id: number; pages: number | undefined }
  | { type: 'close' };

export type FromArchiveThread =
  | { type: 'paused'; id: number; segment: BatchDone | null }
  | { type: 'done'; id: number; value: ArchiveRun | number }
  | { type: 'failed'; id: number; error: { name: string; message: string; stack?: string } }
  | { type: 'closed' };

interface Pending {
  resolve: (value: never) => void;
  reject: (err: Error) => void;
  pause?: (segment: BatchDone | null) => Promise<void>;
  stopped?: () => boolean;
}

/**
 * An Archiver on a SQLite file in a worker thread (archive-thread): planning, reading, the
 * segment's encoding, gzip and fsync, and the batch transaction run there, so the server's event
 * loop only ever waits for the database's write lock, and only when it appends meanwhile. The
 * run's pause and stop are the caller's: after each batch the thread waits for the caller's rest.
 */
export class ThreadArchiver implements ArchiveRunner {
  readonly holdsEventLoop = false;
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private broken: Error | null = null;
  private closing: Promise<void> | null = null;

  constructor(data: ArchiveThreadData) {
    this.worker = startModuleWorker(__dirname, 'archive-thread', data);
    this.worker.unref();
    this.worker.on('message', (m: FromArchiveThread) => this.receive(m));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => this.fail(new Error(`the archive thread exited with code ${code}`)));
  }

  run(
    policy: RetentionPolicy,
    now: number,
    options: Parameters<Archiver['run']>[2] = {},
  ): Promise<ArchiveRun> {
    const { pause, stopped, ...rest } = options;
    return this.call<ArchiveRun>(
      (id) => ({
        type: 'run',
        id,
        policy,
        now,
        options: rest,
        pauses: pause !== undefined || stopped !== undefined,
      }),
      { pause, stopped },
    );
  }

  reclaim(pages?: number): Promise<number> {
    return this.call<number>((id) => ({ type: 'reclaim', id, pages }));
  }

  /** Ends the thread (its connection closed first); call once nothing is pending. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      if (this.broken) return resolve();
      this.worker.once('exit', () => resolve());
      this.worker.ref();
      this.worker.postMessage({ type: 'close' } satisfies ToArchiveThread);
    });
    return this.closing;
  }

  private call<T>(
    message: (id: number) => ToArchiveThread,
    hooks: Omit<Pending, 'resolve' | 'reject'> = {},
  ): Promise<T> {
    if (this.broken) return Promise.reject(this.broken);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: never) => void, reject, ...hooks });
      this.worker.ref();
      this.worker.postMessage(message(id));
    });
  }

  private receive(m: FromArchiveThread): void {
    if (m.type === 'closed') return;
    const p = this.pending.get(m.id);
    if (!p) return;
    if (m.type === 'paused') {
      void (async () => {
        let stop = true;
        try {
          if (p.pause) await p.pause(m.segment);
          stop = p.stopped?.() ?? false;
        } finally {
          this.worker.postMessage({ type: 'resume', id: m.id, stop } satisfies ToArchiveThread);
        }
      })();
      return;
    }
    this.pending.delete(m.id);
    if (this.pending.size === 0) this.worker.unref();
    if (m.type === 'done') p.resolve(m.value as never);
    else p.reject(Object.assign(new Error(m.error.message), { name: m.error.name, stack: m.error.stack }));
  }

  private fail(err: Error): void {
    if (this.broken) return;
    this.broken = this.closing ? new Error('the archive thread is closed') : err;
    for (const p of this.pending.values()) p.reject(this.broken);
    this.pending.clear();
  }
}
