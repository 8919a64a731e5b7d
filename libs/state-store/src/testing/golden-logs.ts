import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Kysely, Selectable } from 'kysely';
import { Database, EventsTable } from '@runledger/event-store';
import { TaskState } from '../task-state';

/** A stored events row as a golden log keeps it: the payload as the JSON text it was written as. */
export type GoldenRow = Selectable<EventsTable>;

export interface GoldenLog {
  name: string;
  rows: GoldenRow[];
  /** every task's state as the code that wrote the log folded it */
  states: Record<string, TaskState>;
}

const FOLDER = join(__dirname, '..', '..', 'fixtures', 'event-logs');

/**
 * The committed golden logs: events as a release wrote them (`<name>.jsonl`, one stored row a line)
 * and the state each task folded to then (`<name>.states.json`). Never regenerated: a new release
 * whose events look different adds a log of its own beside them; scripts/golden-log/record.ts records
 * one from the databases of real runs.
 */
export const GOLDEN_LOG_NAMES = [
  'log-v1',
  'log-v1-b',
  'log-v1-c',
  'log-v1-catalogued',
  'log-v1-tree-erased',
  'log-v1-memory-ids',
  'log-v1-memory-hook',
] as const;

/**
 * Shapes of today's events that the golden logs must hold an example of, beside one of each event
 * type: a shape an event type took later (a field left out) needs its own examples, so a change to
 * it without an upcaster fails the golden spec as a change to any other stored shape does.
 * scripts/golden-log/record.ts records streams holding a missing shape as it does a missing type.
 */
export const GOLDEN_SHAPES: ReadonlyArray<{ name: string; type: string; matches(row: GoldenRow): boolean }> =
  [
    {
      name: 'MEMORY_WRITTEN reinforce naming its entry by id, without text',
      type: 'MEMORY_WRITTEN',
      matches: (row) => memoryWrite(row, 'reinforce'),
    },
    {
      // a task's memory hook, in the task's stream (not `system:memory` nor an `outbound:` companion)
      name: "MEMORY_WRITTEN reinforce in a task's own stream, without text",
      type: 'MEMORY_WRITTEN',
      matches: (row) => memoryWrite(row, 'reinforce') && !row.task_id.includes(':'),
    },
    {
      name: 'MEMORY_WRITTEN delete naming its entry by id, without text',
      type: 'MEMORY_WRITTEN',
      matches: (row) => memoryWrite(row, 'delete'),
    },
  ];

function memoryWrite(row: GoldenRow, op: string): boolean {
  if (row.type !== 'MEMORY_WRITTEN') return false;
  const payload = JSON.parse(row.payload) as Record<string, unknown>;
  return payload.op === op && typeof payload.entry_id === 'string' && !('text' in payload);
}

/** What a golden row is an example of: its event type, and each of GOLDEN_SHAPES it has. */
export const examplesOf = (row: GoldenRow): string[] => [
  row.type,
  ...GOLDEN_SHAPES.filter((s) => s.matches(row)).map((s) => s.name),
];

export function readGoldenLog(name: (typeof GOLDEN_LOG_NAMES)[number]): GoldenLog {
  const rows = readFileSync(join(FOLDER, `${name}.jsonl`), 'utf8')
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as GoldenRow);
  const states = JSON.parse(readFileSync(join(FOLDER, `${name}.states.json`), 'utf8')) as Record<
    string,
    TaskState
  >;
  return { name, rows, states };
}

/** Writes a golden log's rows into a migrated database as they were stored (their own schema versions). */
export async function loadGoldenLog(db: Kysely<Database>, log: GoldenLog): Promise<void> {
  for (let i = 0; i < log.rows.length; i += 200) {
    const page = log.rows.slice(i, i + 200).map(({ position: _position, ...row }) => row);
    await db.insertInto('events').values(page).execute();
  }
}
