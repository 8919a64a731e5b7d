/**
 * Worker thread entry (see index-rebuild.ts): builds a VectorIndex from the pages the main thread
 * sends and saves it to its file, so the HNSW inserts of a rebuild never run on the event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { IndexBuildJob, IndexBuildMessage } from './index-rebuild-protocol';
import { VectorIndex } from './vector-index';

const job = (workerData as { data: IndexBuildJob }).data;
const index = VectorIndex.empty(job.path, job.model, job.dim, job.params);

parentPort!.on('message', (message: IndexBuildMessage) => {
  if (message.type === 'page') {
    const { labels, vectors, deleted } = message;
    for (let i = 0; i < labels.length; i++)
      index.add(labels[i], vectors.subarray(i * job.dim, (i + 1) * job.dim), deleted[i] === 1);
    parentPort!.postMessage({ type: 'added', count: labels.length });
  } else {
    index.save();
    parentPort!.postMessage({ type: 'saved', size: index.size });
  }
});
