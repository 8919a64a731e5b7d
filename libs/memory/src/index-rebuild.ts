import { startModuleWorker } from '@runledger/event-store';
import { IndexBuildJob, IndexBuildMessage, IndexBuildReply } from './index-rebuild-protocol';
import { IndexSource } from './vector-index';

export interface IndexRebuild {
  /** resolves once the index file is saved; rejects when the worker failed or the rebuild was cancelled */
  readonly done: Promise<void>;
  /** stops the worker; the file is left as it was (the next open rebuilds again) */
  cancel(): Promise<void>;
}

/**
 * Rebuilds the index file at `job.path` from the table in a worker thread: this thread reads the
 * table a page at a time and hands each page over (its buffers transferred, not copied) once the
 * worker has added the previous one, so at most one page is in flight.
 */
export function rebuildIndexInWorker(job: IndexBuildJob, source: IndexSource): IndexRebuild {
  const worker = startModuleWorker(__dirname, 'index-build-worker', job);
  let cancelled = false;
  const stopped = new Promise<never>((_, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`index build worker exited (code ${code})`)));
  });
  stopped.catch(() => undefined);
  const send = (message: IndexBuildMessage, transfer: ArrayBuffer[] = []): Promise<IndexBuildReply> => {
    worker.postMessage(message, transfer);
    return Promise.race([
      new Promise<IndexBuildReply>((resolve) => worker.once('message', resolve)),
      stopped,
    ]);
  };

  const done = (async () => {
    for await (const page of source.pages()) {
      if (cancelled) break;
      const labels = new Int32Array(page.length);
      const vectors = new Float32Array(page.length * job.dim);
      const deleted = new Uint8Array(page.length);
      page.forEach((v, i) => {
        if (v.vector.length !== job.dim)
          throw new Error(`vector of label ${v.label} has dim ${v.vector.length}, index dim ${job.dim}`);
        labels[i] = v.label;
        vectors.set(v.vector, i * job.dim);
        deleted[i] = v.deleted ? 1 : 0;
      });
      await send({ type: 'page', labels, vectors, deleted }, [labels.buffer, vectors.buffer, deleted.buffer]);
    }
    if (cancelled) throw new Error('index rebuild cancelled');
    await send({ type: 'end' });
  })().finally(() => worker.terminate());

  return {
    done,
    async cancel() {
      cancelled = true;
      await worker.terminate();
      await done.catch(() => undefined);
    },
  };
}
