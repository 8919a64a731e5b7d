/**
 * Part of `npm run bench -- event-store`: PgEventStore against raw `pg`
 * inserts (BEGIN, INSERT, COMMIT on a pool client: the least an acknowledged,
 * durable append can cost), same schema, same run, on a database of its own:
 *   - one writer appending one event at a time
 *   - 16 writers at once, each on its own task (PgEventStore group-commits them:
 *     one transaction and one commit for what arrives together)
 * Raw and store alternate in rounds; the per-round median ratio is the figure
 * to trust on a shared machine.
 * Env: BENCH_PG_URL (else RUNLEDGER_TEST_PG_URL, else the local server), BENCH_PG_EVENTS (2000),
 * BENCH_PG_ROUNDS (3). Skipped with one line when PostgreSQL cannot be reached.
 */
import { randomBytes } from 'node:crypto';
import { PgEventStore, PostgresHandle, openPostgres } from '@runledger/event-store';
import { migrateToLatest } from '@runledger/migrations';
import { Client } from 'pg';
import { chunkEvent, chunkPayload, fmt, rawChunkRow } from './bench-support';

const URL_ =
  process.env.BENCH_PG_URL ??
  process.env.RUNLEDGER_TEST_PG_URL ??
  'postgres://runledger:runledger@localhost:5432/runledger';
const EVENTS = Number(process.env.BENCH_PG_EVENTS ?? 2000);
const ROUNDS = Number(process.env.BENCH_PG_ROUNDS ?? 3);
const CONCURRENCY = 16;

interface Side {
  name: string;
  /** append events 1..count of `taskId`, one per append, awaiting each */
  appendOneByOne(taskId: string, count: number): Promise<void>;
}

function rawSide(handle: PostgresHandle): Side {
  return {
    name: 'raw pg (BEGIN, INSERT, COMMIT)',
    async appendOneByOne(taskId, count) {
      for (let s = 1; s <= count; s++) {
        const client = await handle.pool.connect();
        try {
          await client.query('BEGIN');
          await client.query(
            `INSERT INTO events (event_id, task_id, session_id, sequence, type, payload, causation_id, correlation_id, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
            rawChunkRow(taskId, s, new Date().toISOString()),
          );
          await client.query('COMMIT');
        } finally {
          client.release();
        }
      }
    },
  };
}

function storeSide(store: PgEventStore): Side {
  return {
    name: 'PgEventStore (group commit)',
    async appendOneByOne(taskId, count) {
      for (let s = 0; s < count; s++)
        await store.append(taskId, [chunkEvent(s + 1)], {
          expected: s,
        });
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Runs one statement on `url` over a connection of its own. */
export async function admin(url: string, statement: string): Promise<void> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

async function measure(sides: Side[], writers: number): Promise<{ rates: number[]; medianRatio: number }> {
  const perWriter = Math.max(1, Math.floor(EVENTS / writers));
  const seconds = sides.map(() => 0);
  const ratios: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const roundRates = sides.map(() => 0);
    for (let k = 0; k < sides.length; k++) {
      const i = (k + round) % sides.length;
      const t0 = process.hrtime.bigint();
      await Promise.all(
        Array.from({ length: writers }, (_, w) =>
          sides[i].appendOneByOne(`${i}_${writers}_${round}_${w}`, perWriter),
        ),
      );
      const s = Number(process.hrtime.bigint() - t0) / 1e9;
      seconds[i] += s;
      roundRates[i] = (perWriter * writers) / s;
    }
    ratios.push(roundRates[1] / roundRates[0]);
  }
  return {
    rates: seconds.map((s) => (perWriter * writers * ROUNDS) / s),
    medianRatio: median(ratios),
  };
}

export async function main(): Promise<void> {
  const database = `rl_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  try {
    await admin(URL_, `CREATE DATABASE ${database}`);
  } catch (err) {
    console.log(
      `\nPostgreSQL appends skipped: cannot reach the server (${(err as Error).message}); set BENCH_PG_URL`,
    );
    return;
  }
  const url = new URL(URL_);
  url.pathname = `/${database}`;
  const rawHandle = openPostgres({ url: url.toString(), schema: 'raw', maxConnections: CONCURRENCY + 2 });
  const storeHandle = openPostgres({ url: url.toString(), schema: 'store', maxConnections: CONCURRENCY + 2 });
  try {
    for (const h of [rawHandle, storeHandle]) {
      await admin(url.toString(), `CREATE SCHEMA ${h.schema}`);
      await migrateToLatest(h.db);
    }
    const store = new PgEventStore(storeHandle);
    const sides = [rawSide(rawHandle), storeSide(store)];
    console.log(
      `\nPgEventStore vs raw pg: ${fmt(EVENTS)} one-event appends per workload, ~${JSON.stringify(chunkPayload(0)).length}-byte payloads, ` +
        `${ROUNDS} alternating rounds, synchronous_commit as the server has it`,
    );
    for (const writers of [1, CONCURRENCY]) {
      const { rates, medianRatio } = await measure(sides, writers);
      console.log(`append, one event per append, ${writers} concurrent writer${writers > 1 ? 's' : ''}`);
      for (let i = 0; i < sides.length; i++)
        console.log(
          `  ${sides[i].name.padEnd(36)} ${fmt(rates[i]).padStart(9)} events/s` +
            (i === 0
              ? '  (baseline)'
              : `  ratio ${(rates[i] / rates[0]).toFixed(2)}x raw overall, ${medianRatio.toFixed(2)}x median of ${ROUNDS} rounds`),
        );
    }
    await store.close();
  } finally {
    await rawHandle.close();
    await storeHandle.close();
    await admin(URL_, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}
