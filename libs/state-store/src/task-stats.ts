import { TERMINAL_STATUSES } from '@runledger/contracts';
import { Kysely } from 'kysely';
import { ModelUsageRow } from './model-usage';
import { StateStoreDatabase } from './schema';

/** A task that has ended: when it started and ended, and why it stopped. */
export interface EndedTaskRow {
  stop_reason: string | null;
  created_at: string;
  updated_at: string;
}

/** Reads for the dashboard's charts over the task-state projection and the model-usage read model. Holds no decisions. */
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

  /**
   * Tokens and cost per UTC day and model, from the day of `since` (ISO time) on: the `model_usage`
   * read model, which the task-state projection keeps from MODEL_RESPONDED events as read (past
   * the upcasters) and which archiving leaves in place.
   */
  async modelUsagePerDay(since: string): Promise<ModelUsageRow[]> {
    const rows = await this.db
      .selectFrom('model_usage')
      .selectAll()
      .where('day', '>=', since.slice(0, 10))
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
