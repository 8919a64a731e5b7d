/**
 * Records a golden log from real runs: whole streams, picked out of the databases that tests wrote,
 * so that every event type of the catalogue, and every shape of GOLDEN_SHAPES, has an example in the
 * committed golden logs.
 *
 *   1. run the suites that write the missing types, keeping their databases:
 *        RUNLEDGER_GOLDEN_HARVEST=/tmp/harvest npx jest --config scripts/golden-log/jest.config.js <specs>
 *   2. node -r @swc-node/register scripts/golden-log/record.ts /tmp/harvest <log name>
 *
 * Streams holding event types (or shapes) no committed golden log holds are taken whole (every event of each, in
 * order), the one with the most such types first, then the shortest, from one database per stream name (system streams such as
 * `system:schedules` exist in every database, with their own sequences). Streams whose payloads are
 * sealed (erasure on) are left out: a golden log is read without its database's keys. A task
 * stream's state is folded with today's code, as the golden spec folds it again. The log is written
 * beside the others (libs/state-store/fixtures/event-logs) and added to GOLDEN_LOG_NAMES by hand.
 */
import { readdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { EVENT_TYPES } from '@runledger/contracts';
import { createSqliteStorage, foldTaskState, TaskState } from '@runledger/state-store';
import {
  GOLDEN_LOG_NAMES,
  GOLDEN_SHAPES,
  GoldenRow,
  examplesOf,
  readGoldenLog,
} from '../../libs/state-store/src/testing/golden-logs';

const FOLDER = join(__dirname, '..', '..', 'libs', 'state-store', 'fixtures', 'event-logs');

interface Candidate {
  database: string;
  stream: string;
  rows: GoldenRow[];
  /** the event types and shapes its rows are examples of */
  types: Set<string>;
}

function databasesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? databasesUnder(join(dir, e.name)) : e.name.endsWith('.db') ? [join(dir, e.name)] : [],
  );
}

/** Every stream of the database holding an example of `wanted`, whole, unless a payload of it is sealed. */
function candidatesIn(database: string, wanted: ReadonlySet<string>): Candidate[] {
  const db = new Database(database, { readonly: true, fileMustExist: true });
  try {
    const hasEvents = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'")
      .get();
    if (!hasEvents) return [];
    const types = [...wanted].map((w) => GOLDEN_SHAPES.find((s) => s.name === w)?.type ?? w);
    const streams = db
      .prepare(`SELECT DISTINCT task_id FROM events WHERE type IN (${types.map(() => '?').join(',')})`)
      .all(...types) as { task_id: string }[];
    return streams.flatMap(({ task_id }) => {
      const rows = db
        .prepare('SELECT * FROM events WHERE task_id = ? ORDER BY sequence')
        .all(task_id) as GoldenRow[];
      if (rows.some((r) => r.payload.includes('"$sealed"') || r.payload.includes('"$erased"'))) return [];
      return [{ database, stream: task_id, rows, types: new Set(rows.flatMap(examplesOf)) }];
    });
  } finally {
    db.close();
  }
}

async function main(): Promise<void> {
  const [harvest, name] = process.argv.slice(2);
  if (!harvest || !name) throw new Error('usage: record.ts <harvest folder> <log name>');
  if (existsSync(join(FOLDER, `${name}.jsonl`)))
    throw new Error(`golden log ${name} exists: never rewritten`);
  const covered = new Set(GOLDEN_LOG_NAMES.flatMap((n) => readGoldenLog(n).rows.flatMap(examplesOf)));
  const missing = new Set<string>(
    [...EVENT_TYPES, ...GOLDEN_SHAPES.map((s) => s.name)].filter((t) => !covered.has(t)),
  );
  const candidates = databasesUnder(harvest).flatMap((db) => candidatesIn(db, missing));

  // greedy cover: the stream with the most types still missing (the shortest of those), one at a time
  const picked: Candidate[] = [];
  const streamFrom = new Map<string, string>();
  const gain = (c: Candidate) => [...c.types].filter((t) => missing.has(t)).length;
  for (;;) {
    const best = candidates
      .filter((c) => gain(c) > 0 && (streamFrom.get(c.stream) ?? c.database) === c.database)
      .sort((a, b) => gain(b) - gain(a) || a.rows.length - b.rows.length)[0];
    if (!best) break;
    picked.push(best);
    streamFrom.set(best.stream, best.database);
    best.types.forEach((t) => missing.delete(t));
  }

  const rows: GoldenRow[] = [];
  const states: Record<string, TaskState> = {};
  for (const database of [...new Set(picked.map((c) => c.database))]) {
    const streams = picked.filter((c) => c.database === database);
    // the global log's order within each database, positions renumbered as one log
    const ordered = streams.flatMap((c) => c.rows).sort((a, b) => Number(a.position) - Number(b.position));
    for (const row of ordered) rows.push({ ...row, position: rows.length + 1 });
    const storage = await createSqliteStorage({ path: database, synchronous: 'NORMAL' });
    try {
      for (const c of streams) {
        if (c.rows[0].type !== 'TASK_RECEIVED') continue;
        const state = foldTaskState(await storage.eventStore.readStream(c.stream));
        if (state) states[c.stream] = state;
      }
    } finally {
      await storage.close();
    }
  }
  writeFileSync(join(FOLDER, `${name}.jsonl`), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  writeFileSync(join(FOLDER, `${name}.states.json`), JSON.stringify(states, null, 2) + '\n');
  const types = new Set(rows.map((r) => r.type));
  console.log(
    `${name}: ${rows.length} events, ${picked.length} streams, ${Object.keys(states).length} tasks, ${types.size} types`,
  );
  if (missing.size > 0) console.log(`still without an example: ${[...missing].join(' ')}`);
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
