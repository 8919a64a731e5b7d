import { EventStore } from '@runledger/event-store';
import { Embedder } from './embedder';
import { MemoryFilter, MemoryStore } from './memory-store';
import { HnswParams } from './vector-index';

export interface MemoryServiceOptions {
  store: MemoryStore;
  events: EventStore;
  embedder: Embedder;
  /** the HNSW file; null keeps the index in memory only */
  indexPath: string | null;
  hnsw?: HnswParams;
  /** a filtered search over at most this many entries scans them exactly instead of asking the index */
  exactScanBelow?: number;
  /**
   * While there are at most `exactScanBelow` live entries, keep them with their vectors in memory
   * so an exact scan (search, nearest) reads no table (default true; false reads the table each time).
   */
  keepLiveEntries?: boolean;
  /**
   * a missing or stale index file is rebuilt in a worker thread while searches scan the stored
   * vectors exactly; otherwise open rebuilds it before it returns
   */
  rebuildInBackground?: boolean;
  /** the index file is written at most this often (and on close); a crash loses nothing, open catches up from the table */
  saveIntervalMs?: number;
  /**
   * A write reinforces only entries of its own session and those written for nobody (a write for
   * nobody: those alone), never another session's: with erasure on, so no session's log names
   * another session's entry (RUNLEDGER_ERASURE=on). Off: deduplication compares every session's entries.
   */
  deduplicateWithinSession?: boolean;
  log?: (message: string, err?: unknown) => void;
}

/**
 * What a read sees of the log before it runs. `committed`: everything
 * committed before the call, read from the log. `heard`: what this process
 * heard committed (its own writes as they commit, another process's within
 * the store's poll of the file or with this process's next commit), with no
 * read of the log when nothing new was heard. For a task's deduplication and
 * recall: a write racing them from another process is missed either way.
 */
export type MemoryFreshness = 'committed' | 'heard';

export interface MemorySearchOptions extends MemoryFilter {
  k: number;
  /** default `committed` */
  freshness?: MemoryFreshness;
}

const defaultLog = (message: string, err?: unknown) =>
  process.stderr.write(
    `runledger: ${message}${err ? `: ${err instanceof Error ? err.message : String(err)}` : ''}\n`,
  );

/** Where memory's failures that fail no caller are told. */
export const logOf = (o: MemoryServiceOptions): ((message: string, err?: unknown) => void) =>
  o.log ?? defaultLog;

const DEFAULT_EXACT_SCAN_BELOW = 2000;

/** Up to how many entries a search or deduplication scans exactly. */
export const exactScanLimit = (o: MemoryServiceOptions): number =>
  o.exactScanBelow ?? DEFAULT_EXACT_SCAN_BELOW;
