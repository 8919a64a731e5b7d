import {
  GlobalLogPage,
  GlobalLogQuery,
  archivedRangesThrough,
  readGlobalLogPage,
} from '@runledger/event-store';
import { Storage } from '../storage';
import { loadGoldenLog, readGoldenLog } from '../testing/golden-logs';
import { TempStorage, describeEachStorage } from '../testing/temp-storage';
import { openSqliteArchiver, postgresArchiver } from './open-archiver';
import { parseRetention } from './retention-policy';

/**
 * A reader of the global log that pages by next_after_position, over a log whose tasks were moved
 * into several archive segments: it always moves on (a wholly archived stretch, a filter that
 * matches nothing live, a tail of archived events), never reads a window twice, and is told every
 * archived range, so live events and archived ranges together account for every position once.
 */
const golden = readGoldenLog('log-v1');
const LATER = Date.parse('2026-11-30T04:00:00Z');

async function archiveEachTree(temp: TempStorage<Storage>): Promise<void> {
  const policy = parseRetention('1h')!;
  if (temp.storage.driver === 'postgres') {
    await postgresArchiver(temp.storage.db, { batchTasks: 1 }).run(policy, LATER);
    return;
  }
  const access = openSqliteArchiver(temp.path, { batchTasks: 1 });
  try {
    await access.archiver.run(policy, LATER);
  } finally {
    await access.close();
  }
}

/** Pages from position 0 to the head; fails on a page that does not move the cursor on. */
async function pageThrough(
  storage: Storage,
  query: Omit<GlobalLogQuery, 'after_position'>,
  rangesPerPage?: number,
): Promise<GlobalLogPage[]> {
  const pages: GlobalLogPage[] = [];
  for (let after = 0; ;) {
    const page = await readGlobalLogPage(
      storage.eventStore,
      { ...query, after_position: after },
      rangesPerPage,
    );
    pages.push(page);
    if (page.next_after_position >= page.head_position) return pages;
    expect(page.next_after_position).toBeGreaterThan(after);
    expect(pages.length).toBeLessThan(page.head_position);
    after = page.next_after_position;
  }
}

describeEachStorage('readGlobalLogPage', (open) => {
  // a block of its own: its afterAll runs before the test database is dropped
  describe('over archived stretches', () => {
    let temp: TempStorage<Storage>;
    let head: number;
    beforeAll(async () => {
      temp = await open();
      await loadGoldenLog(temp.storage.db, golden);
      await temp.storage.taskStates.rebuild();
      await archiveEachTree(temp);
      head = (await temp.storage.eventStore.head()).position;
    });
    afterAll(() => temp.dispose());

    /** every archived position, by range, from the archived tasks' own streams */
    const archivedPositions = async (page: GlobalLogPage) => {
      const out: number[] = [];
      for (const range of page.archived)
        for (const id of range.task_ids)
          out.push(...(await temp.storage.eventStore.readStream(id)).map((e) => e.position));
      return out;
    };

    it('archived the golden log into several segments: only the archive records are live', async () => {
      const ranges = await temp.storage.eventStore.archivedRanges(0);
      expect(ranges.length).toBeGreaterThanOrEqual(4);
      const live = await temp.storage.eventStore.readAll();
      expect(live.every((e) => e.type === 'TASKS_ARCHIVED')).toBe(true);
      expect(live).toHaveLength(ranges.length);
      expect(head).toBe(golden.rows.length + ranges.length);
    });

    it.each([
      ['pages of 1, every range told', 1, undefined],
      ['pages of 3, two ranges told a page', 3, 2],
      ['pages of 1000, one range told a page', 1000, 1],
    ])('%s: live events and told ranges cover every position once', async (_name, limit, perPage) => {
      const pages = await pageThrough(temp.storage, { limit }, perPage);
      const seen: number[] = [];
      let after = 0;
      for (const page of pages) {
        const live = page.events.map((e) => e.position);
        const archived = (await archivedPositions(page)).filter(
          (p) => p > after && p <= page.next_after_position,
        );
        seen.push(...live, ...archived);
        expect([...live, ...archived].every((p) => p > after && p <= page.next_after_position)).toBe(true);
        if (perPage) expect(page.archived.length).toBeLessThanOrEqual(perPage);
        after = page.next_after_position;
      }
      expect(seen.sort((a, b) => a - b)).toEqual(Array.from({ length: head }, (_, i) => i + 1));
    });

    it('a filter that matches only archived events moves the cursor to the head, and tells every range', async () => {
      const pages = await pageThrough(temp.storage, { limit: 2, types: ['TASK_COMPLETED', 'TASK_FAILED'] });
      expect(pages).toHaveLength(1);
      expect(pages[0]).toMatchObject({ events: [], next_after_position: head, head_position: head });
      expect(new Set(pages[0].archived.flatMap((r) => r.task_ids))).toEqual(
        new Set(Object.keys(golden.states)),
      );
      // read again from there: nothing, and no step back
      const again = await readGlobalLogPage(temp.storage.eventStore, { after_position: head, limit: 2 });
      expect(again).toEqual({ events: [], next_after_position: head, head_position: head, archived: [] });
    });

    it('archivedRangesThrough, a subscriber’s list: tells all through the head, or stops before the first untold', async () => {
      const all = await temp.storage.eventStore.archivedRanges(0, head);
      expect(await archivedRangesThrough(temp.storage.eventStore, 0, head)).toEqual({
        archived: all,
        through: head,
      });
      const two = await archivedRangesThrough(temp.storage.eventStore, 0, head, 2);
      expect(two).toEqual({ archived: all.slice(0, 2), through: all[2].first_position - 1 });
    });

    it('an archived task read by task_id: no events, the cursor at the head, its range told', async () => {
      const taskId = Object.keys(golden.states)[0];
      const page = await readGlobalLogPage(temp.storage.eventStore, {
        after_position: 0,
        limit: 10,
        task_id: taskId,
      });
      expect(page).toMatchObject({ events: [], next_after_position: head });
      expect(page.archived.flatMap((r) => r.task_ids)).toContain(taskId);
    });
  });
});
