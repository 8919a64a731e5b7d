import { EVENT_TYPES, RuntimeEvent, parseEventBody, upcastPayload } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { foldTaskState } from './task-state';
import {
  GOLDEN_LOG_NAMES,
  GOLDEN_SHAPES,
  GoldenLog,
  examplesOf,
  loadGoldenLog,
  readGoldenLog,
} from './testing/golden-logs';
import { describeEachStorage } from './testing/temp-storage';

/**
 * Logs written by earlier releases replay with today's code: every stored payload, upcast from the
 * version it was written with, is accepted by today's catalogue without losing a field, and every
 * task folds to the state it folded to when it was written. A change to an event's shape without
 * an upcaster (a field renamed, removed or made required) fails here.
 */
const logs = GOLDEN_LOG_NAMES.map(readGoldenLog);

it('every event type of the catalogue and every listed shape has an example in the golden logs, and tasks ended every way', () => {
  const recorded = new Set(logs.flatMap((log) => log.rows.flatMap(examplesOf)));
  // a new event type (or shape) needs a golden example: record one (scripts/golden-log/record.ts) in a new log
  expect(EVENT_TYPES.filter((type) => !recorded.has(type))).toEqual([]);
  expect(GOLDEN_SHAPES.map((s) => s.name).filter((shape) => !recorded.has(shape))).toEqual([]);
  const ends = new Set(logs.flatMap((log) => Object.values(log.states).map((s) => s.status)));
  expect([...ends]).toEqual(expect.arrayContaining(['completed', 'failed', 'cancelled']));
});

describe.each(logs.map((log) => [log.name, log] as const))('golden log %s', (_name, log) => {
  it('every payload, upcast, parses with today’s catalogue and keeps every field it was written with', () => {
    for (const row of log.rows) {
      const lifted = upcastPayload(row.type, row.schema_version, JSON.parse(row.payload)) as object;
      const parsed = parseEventBody({ type: row.type, payload: lifted });
      expect({ event_id: row.event_id, payload: parsed.payload }).toMatchObject({
        event_id: row.event_id,
        payload: lifted,
      });
    }
  });
});

/**
 * Reads every stream of the log back through the store, raw and parsed (a task's, and the system,
 * session, hook and outbound streams), and folds every task.
 */
async function expectReplays(store: EventStore, log: GoldenLog): Promise<void> {
  const streams = [...new Set(log.rows.map((r) => r.task_id))];
  expect(streams).toEqual(expect.arrayContaining(Object.keys(log.states)));
  for (const stream of streams) {
    const events = await store.readStream(stream);
    expect(events.map((e) => e.event_id)).toEqual(
      log.rows.filter((r) => r.task_id === stream).map((r) => r.event_id),
    );
    if (log.states[stream]) expect(foldTaskState(events)).toEqual(log.states[stream]);
    const raw = await store.readStreamRaw(stream);
    expect(raw.map((r) => JSON.parse(r.json) as RuntimeEvent)).toEqual(events);
  }
  const all = await store.readAll();
  expect(all.map((e) => e.event_id)).toEqual(log.rows.map((r) => r.event_id));
}

describeEachStorage('golden logs replayed', (open) => {
  it.each(logs.map((log) => [log.name, log] as const))(
    '%s: every task folds to the state it had when written',
    async (_name, log) => {
      const { storage, dispose } = await open();
      try {
        await loadGoldenLog(storage.db, log);
        await expectReplays(storage.eventStore, log);
      } finally {
        await dispose();
      }
    },
  );
});
