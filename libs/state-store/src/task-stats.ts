import { TERMINAL_STATUSES } from '@runledger/contracts';
import { CatalogReader } from '@runledger/event-store';
import { Kysely, sql } from 'kysely';
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
  constructor(
    private readonly db: Kysely<StateStoreDatabase>,
    /** the archive's catalog: the rows of tasks archived long ago (TaskStateStore.catalog) */
    private readonly catalog: CatalogReader | null = null,
  ) {}

  /** Tasks that ended at or after `since` (ISO time), live and catalogued, oldest end first. */
  async endedTasks(since: string): Promise<EndedTaskRow[]> {
    const ended = (db: Kysely<StateStoreDatabase>, table: 'tasks' | 'catalog_tasks') =>
      db
        .selectFrom(table as 'tasks')
        .select(['stop_reason', 'created_at', 'updated_at'])
        .where('status', 'in', [...TERMINAL_STATUSES])
        .where('updated_at', '>=', since)
        .$if(table === 'catalog_tasks', (q) =>
          q.where(sql<boolean>`NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = catalog_tasks.task_id)`),
        )
        .orderBy('updated_at')
        .execute();
    const live = await ended(this.db, 'tasks');
    const catalog = this.catalog?.db();
    if (!catalog) return live;
    const catalogued = await ended(catalog as unknown as Kysely<StateStoreDatabase>, 'catalog_tasks');
    return catalogued.length === 0
      ? live
      : [...live, ...catalogued].sort((a, b) =>
          a.updated_at < b.updated_at ? -1 : a.updated_at > b.updated_at ? 1 : 0,
        );
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
