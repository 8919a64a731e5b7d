import { RuntimeEvent } from '@runledger/contracts';

/** A row of `model_usage`: model answers of one UTC day and one model, summed. */
export interface ModelUsageRow {
  day: string;
  model: string;
  model_calls: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_usd: number;
}

/** What a run of events adds to `model_usage`: one row per day and model of its MODEL_RESPONDED events. */
export function modelUsageOf(events: readonly RuntimeEvent[]): ModelUsageRow[] {
  const rows = new Map<string, ModelUsageRow>();
  for (const e of events) {
    if (e.type !== 'MODEL_RESPONDED') continue;
    const day = e.created_at.slice(0, 10);
    const key = `${day}\u0000${e.payload.model}`;
    let row = rows.get(key);
    if (!row) {
      row = {
        day,
        model: e.payload.model,
        model_calls: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        total_tokens: 0,
        cost_usd: 0,
      };
      rows.set(key, row);
    }
    row.model_calls += 1;
    row.prompt_tokens += e.payload.usage.prompt_tokens;
    row.completion_tokens += e.payload.usage.completion_tokens;
    row.total_tokens += e.payload.usage.total_tokens;
    row.cost_usd += e.payload.cost_usd ?? 0;
  }
  return [...rows.values()];
}

const SUMMED = ['model_calls', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'cost_usd'] as const;

/** Adds a row to what `model_usage` holds for its day and model (same SQL on SQLite and PostgreSQL but for the parameters). */
export const modelUsageUpsert = (param: (name: keyof ModelUsageRow, i: number) => string): string =>
  `INSERT INTO model_usage (day, model, ${SUMMED.join(', ')}) VALUES (${(['day', 'model', ...SUMMED] as const)
    .map(param)
    .join(', ')}) ON CONFLICT (day, model) DO UPDATE SET ${SUMMED.map(
    (c) => `${c} = model_usage.${c} + excluded.${c}`,
  ).join(', ')}`;
