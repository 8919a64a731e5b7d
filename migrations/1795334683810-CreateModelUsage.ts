/* eslint-disable @typescript-eslint/no-explicit-any -- migrations take Kysely<any> so an old one never breaks when the schema types move on */
import { Kysely, sql } from 'kysely';
import { isPostgres } from './dialect';

/**
 * Model usage per UTC day and model: a read model the task-state projection keeps in the append
 * transaction from MODEL_RESPONDED events (as read: past the upcasters), so the dashboard's usage
 * figures never read payloads in SQL and keep counting tasks once their events are archived. It is
 * filled here from the live events as they stand (every MODEL_RESPONDED is at version 1 when this
 * runs); a projection rebuild refolds it from the whole log, archived streams included.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const postgres = isPostgres(db);
  const big = postgres ? 'bigint' : 'integer';
  await db.schema
    .createTable('model_usage')
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('model_calls', big, (c) => c.notNull())
    .addColumn('prompt_tokens', big, (c) => c.notNull())
    .addColumn('completion_tokens', big, (c) => c.notNull())
    .addColumn('total_tokens', big, (c) => c.notNull())
    .addColumn('cost_usd', postgres ? 'double precision' : 'real', (c) => c.notNull())
    .addPrimaryKeyConstraint('model_usage_pk', ['day', 'model'])
    .execute();
  const json = (...keys: string[]) =>
    postgres
      ? sql`(payload::jsonb #>> ${sql.lit(`{${keys.join(',')}}`)})`
      : sql`json_extract(payload, ${sql.lit(`$.${keys.join('.')}`)})`;
  const sum = (...keys: string[]) =>
    sql`coalesce(sum(${postgres ? sql`${json(...keys)}::double precision` : json(...keys)}), 0)`;
  await sql`INSERT INTO model_usage (day, model, model_calls, prompt_tokens, completion_tokens, total_tokens, cost_usd)
    SELECT substr(created_at, 1, 10), coalesce(${json('model')}, ''), count(*),
      ${sum('usage', 'prompt_tokens')}, ${sum('usage', 'completion_tokens')}, ${sum('usage', 'total_tokens')},
      ${sum('cost_usd')}
    FROM events WHERE type = 'MODEL_RESPONDED'
    GROUP BY substr(created_at, 1, 10), coalesce(${json('model')}, '')`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('model_usage').execute();
}
