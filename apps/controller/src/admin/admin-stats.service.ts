import { Inject, Injectable } from '@nestjs/common';
import { StopReason } from '@runledger/contracts';
import { EndedTaskRow, TaskStatsRepository } from '@runledger/state-store';
import { StatsResponse } from '../dtos/stats.dto';

const DAY_MS = 86_400_000;

/** Nearest-rank percentile of sorted values: always one of the durations measured, never an interpolation. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)];
}

function durationSummary(tasks: readonly EndedTaskRow[]) {
  const ms = tasks.map((t) => Date.parse(t.updated_at) - Date.parse(t.created_at)).sort((a, b) => a - b);
  return { tasks: ms.length, p50_ms: percentile(ms, 50), p95_ms: percentile(ms, 95) };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

/** The dashboard's chart figures over the last days: ended tasks per hour, usage per day and model, durations. */
@Injectable()
export class AdminStatsService {
  constructor(@Inject(TaskStatsRepository) private readonly stats: TaskStatsRepository) {}

  async overview(days: number, now = new Date()): Promise<StatsResponse> {
    const since = new Date(now.getTime() - days * DAY_MS).toISOString();
    const [ended, usage] = await Promise.all([
      this.stats.endedTasks(since),
      this.stats.modelUsagePerDay(since),
    ]);
    const perHour = groupBy(ended, (t) => `${t.updated_at.slice(0, 13)}\u0000${t.stop_reason ?? ''}`);
    return {
      since,
      until: now.toISOString(),
      tasks_per_hour: [...perHour.values()].map((group) => ({
        hour: `${group[0].updated_at.slice(0, 13)}:00:00.000Z`,
        stop_reason: group[0].stop_reason as StopReason | null,
        tasks: group.length,
      })),
      usage_per_day: usage,
      duration: durationSummary(ended),
      duration_per_day: [...groupBy(ended, (t) => t.updated_at.slice(0, 10))].map(([day, group]) => ({
        day,
        ...durationSummary(group),
      })),
    };
  }
}
