import { EventVersioning, RuntimeEvent } from '@runledger/contracts';
import { streamQuery } from '../event-queries';
import { RawEvent } from '../event-store';
import { TempSqlite, createTempSqlite } from '../testing/sqlite';
import { RAW_EVENT_JSON, eventFromRow, servedRaw } from './rows';

/** A catalogue in which OUTPUT_CHUNK's `delta` became `text` at version 2. */
const renamed: EventVersioning = {
  versions: { OUTPUT_CHUNK: 2 },
  upcasters: { OUTPUT_CHUNK: { 1: ({ delta, ...rest }) => ({ ...rest, text: delta }) } },
};

const row = (sequence: number, schemaVersion: number, payload: object) => ({
  event_id: `evt_${sequence}`,
  task_id: 't1',
  session_id: 's1',
  sequence,
  type: 'OUTPUT_CHUNK',
  payload: JSON.stringify(payload),
  causation_id: null,
  correlation_id: 't1',
  created_at: '2026-11-29T00:00:00.000Z',
  schema_version: schemaVersion,
});

describe('stored events are upcast on read', () => {
  let db: TempSqlite;
  beforeEach(async () => {
    db = await createTempSqlite();
    await db.handle.db
      .insertInto('events')
      .values([
        row(1, 1, { call_id: 'c', index: 0, delta: 'old shape' }),
        row(2, 2, { call_id: 'c', index: 1, text: 'new shape' }),
      ])
      .execute();
  });
  afterEach(() => db.dispose());

  it('parsed reads lift old rows and leave current ones', async () => {
    const rows = await streamQuery(db.handle.db, 't1', {}).selectAll().execute();
    const events = rows.map((r) => eventFromRow(r, renamed));
    expect(events.map((e) => [e.schema_version, e.payload])).toEqual([
      [2, { call_id: 'c', index: 0, text: 'old shape' }],
      [2, { call_id: 'c', index: 1, text: 'new shape' }],
    ]);
  });

  it('raw reads serve the same JSON as the parsed ones, the stored version read from the text', async () => {
    const rows = await streamQuery(db.handle.db, 't1', {}).selectAll().execute();
    const raw = (await streamQuery(db.handle.db, 't1', {})
      .select(['position', 'sequence', 'task_id', 'type', RAW_EVENT_JSON.as('json')])
      .execute()) as RawEvent[];
    const served = servedRaw(raw, renamed);
    expect(served.map((r) => JSON.parse(r.json) as RuntimeEvent)).toEqual(
      rows.map((r) => eventFromRow(r, renamed)),
    );
    expect(served.map((r) => r.json)).toEqual(rows.map((r) => JSON.stringify(eventFromRow(r, renamed))));
  });

  it('the column defaults to version 1 for rows written before it', async () => {
    const { schema_version, ...older } = row(3, 1, { call_id: 'c', index: 2, delta: 'x' });
    expect(schema_version).toBe(1);
    await db.handle.db.insertInto('events').values(older).execute();
    const stored = await db.handle.db
      .selectFrom('events')
      .select('schema_version')
      .where('sequence', '=', 3)
      .executeTakeFirstOrThrow();
    expect(stored.schema_version).toBe(1);
  });
});
