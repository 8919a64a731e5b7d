import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemoryEventStore } from '@runledger/event-store';

/** A spec's scratch folder and event log, made fresh before each test of the enclosing describe. */
export interface TempStore {
  readonly dir: string;
  readonly store: InMemoryEventStore;
}

/**
 * Registers a beforeEach that makes a temp folder named from `prefix` and a new in-memory log, and an afterEach
 * that removes the folder; `beforeRemove` (a runtime's close) runs first, so nothing still writes into a deleted folder.
 * Read `dir` and `store` through the returned getters: they change with every test.
 */
export function useTempStore(prefix: string, beforeRemove?: () => unknown): TempStore {
  let dir: string | undefined;
  let store: InMemoryEventStore | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
    store = new InMemoryEventStore();
  });
  afterEach(async () => {
    await beforeRemove?.();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  const current = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) throw new Error(`useTempStore: ${name} is only there inside a test`);
    return value;
  };
  return {
    get dir() {
      return current(dir, 'dir');
    },
    get store() {
      return current(store, 'store');
    },
  };
}
