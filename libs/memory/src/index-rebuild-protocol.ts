import { HnswParams } from './vector-index';

/** What the index build worker is started with. */
export interface IndexBuildJob {
  path: string;
  model: string;
  dim: number;
  params: HnswParams;
}

/** Main thread to worker: a page of the table (vectors back to back, `dim` floats each), then the end. */
export type IndexBuildMessage =
  { type: 'page'; labels: Int32Array; vectors: Float32Array; deleted: Uint8Array } | { type: 'end' };

/** Worker to main thread: a page was added (send the next), or the index file is saved. */
export type IndexBuildReply = { type: 'added'; count: number } | { type: 'saved'; size: number };
