import { TERMINAL_STATUSES } from '@runledger/contracts';
import { isPostgres } from '@runledger/migrations';
import { Kysely, sql } from 'kysely';
import { StateStoreDatabase } from './schema';

/** A task that has ended: when it started and ended, and why it stopped. */
export interface EndedTaskRow {
  stop_reason: string | null;
  created_at: string;
  updated_at: string;
}

/** Model usage summed over one UTC day and one model, from the MODEL_RESPONDED events. */
export interface ModelUsageRow {
  day: string;
  model: string;
  model_calls: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_usd: number;
}

/** Reads for the dashboard's charts over the task-state projection and the event log. Holds no decisions. */
export class TaskStatsRepository {
  constructor(private readonly db: Kysely<StateStoreDatabase>) {}

  /** Tasks that ended at or after `since` (ISO time), oldest end first. */
  async endedTasks(since: string): Promise<EndedTaskRow[]> {
    return this.db
      .selectFrom('tasks')
      .select(['stop_reason', 'created_at', 'updated_at'])
      .where('status', 'in', [...TERMINAL_STATUSES])
      .where('updated_at', '>=', since)
      .orderBy('updated_at')
      .execute();
  }

  /** Tokens and cost per UTC day and model, from model answers recorded at or after `since`. */
  async modelUsagePerDay(since: string): Promise<ModelUsageRow[]> {
    const pg = isPostgres(this.db);
    /** a JSON field of the payload (text on both dialects), by its path of keys */
    const json = (...keys: string[]) =>
      pg
        ? sql`(payload::jsonb #>> ${`{${keys.join(',')}}`})`
        : sql`json_extract(payload, ${`$.${keys.join('.')}`})`;
    const field = (...keys: string[]) =>
      sql<number>`coalesce(sum(${pg ? sql`${json(...keys)}::double precision` : json(...keys)}), 0)`;
    const rows = await this.db
      .selectFrom('events')
      .select([
        sql<string>`substr(created_at, 1, 10)`.as('day'),
        sql<string>`${json('model')}`.as('model'),
        (eb) => eb.fn.countAll<number>().as('model_calls'),
        field('usage', 'prompt_tokens').as('prompt_tokens'),
        field('usage', 'completion_tokens').as('completion_tokens'),
        field('usage', 'total_tokens').as('total_tokens'),
        field('cost_usd').as('cost_usd'),
      ])
      .where('type', '=', 'MODEL_RESPONDED')
      .where('created_at', '>=', since)
      .groupBy(['day', 'model'])
      .orderBy('day')
      .orderBy('model')
      .execute();
    return rows.map((r) => ({
      ...r,
      model_calls: Number(r.model_calls),
      prompt_tokens: Number(r.prompt_tokens),
      completion_tokens: Number(r.completion_tokens),
      total_tokens: Number(r.total_tokens),
      cost_usd: Number(r.cost_usd),
    }));
  }
}
