import { EndedTaskRow, ModelUsageRow, TaskStatsRepository } from '@runledger/state-store';
import { AdminStatsService, percentile } from './admin-stats.service';

const ended = (stop_reason: string, start: string, seconds: number): EndedTaskRow => ({
  stop_reason,
  created_at: start,
  updated_at: new Date(Date.parse(start) + seconds * 1000).toISOString(),
});

describe('AdminStatsService', () => {
  const now = new Date('2026-03-10T12:00:00.000Z');
  let repo: jest.Mocked<Pick<TaskStatsRepository, 'endedTasks' | 'modelUsagePerDay'>>;
  let sut: AdminStatsService;

  beforeEach(() => {
    repo = { endedTasks: jest.fn(), modelUsagePerDay: jest.fn() };
    sut = new AdminStatsService(repo as unknown as TaskStatsRepository);
  });

  it('reads the window back from now and groups ended tasks per hour and stop reason', async () => {
    repo.endedTasks.mockResolvedValue([
      ended('completed', '2026-03-09T10:05:00.000Z', 1),
      ended('completed', '2026-03-09T10:30:00.000Z', 3),
      ended('tool_error', '2026-03-09T10:40:00.000Z', 2),
      ended('completed', '2026-03-10T11:00:00.000Z', 10),
    ]);
    const usage: ModelUsageRow[] = [
      {
        day: '2026-03-09',
        model: 'm',
        model_calls: 2,
        prompt_tokens: 5,
        completion_tokens: 5,
        total_tokens: 10,
        cost_usd: 0.1,
      },
    ];
    repo.modelUsagePerDay.mockResolvedValue(usage);

    const stats = await sut.overview(2, now);

    expect(repo.endedTasks).toHaveBeenCalledWith('2026-03-08T12:00:00.000Z');
    expect(repo.modelUsagePerDay).toHaveBeenCalledWith('2026-03-08T12:00:00.000Z');
    expect(stats.since).toBe('2026-03-08T12:00:00.000Z');
    expect(stats.until).toBe(now.toISOString());
    expect(stats.tasks_per_hour).toEqual([
      { hour: '2026-03-09T10:00:00.000Z', stop_reason: 'completed', tasks: 2 },
      { hour: '2026-03-09T10:00:00.000Z', stop_reason: 'tool_error', tasks: 1 },
      { hour: '2026-03-10T11:00:00.000Z', stop_reason: 'completed', tasks: 1 },
    ]);
    expect(stats.usage_per_day).toBe(usage);
    expect(stats.duration).toEqual({ tasks: 4, p50_ms: 2000, p95_ms: 10_000 });
    expect(stats.duration_per_day).toEqual([
      { day: '2026-03-09', tasks: 3, p50_ms: 2000, p95_ms: 3000 },
      { day: '2026-03-10', tasks: 1, p50_ms: 10_000, p95_ms: 10_000 },
    ]);
  });

  it('has no percentiles without ended tasks', async () => {
    repo.endedTasks.mockResolvedValue([]);
    repo.modelUsagePerDay.mockResolvedValue([]);
    expect(await sut.overview(7, now)).toMatchObject({
      tasks_per_hour: [],
      duration: { tasks: 0, p50_ms: null, p95_ms: null },
      duration_per_day: [],
    });
  });

  it('percentile is the nearest rank', () => {
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(hundred, 50)).toBe(50);
    expect(percentile(hundred, 95)).toBe(95);
    expect(percentile([7], 95)).toBe(7);
    expect(percentile([1, 2], 50)).toBe(1);
    expect(percentile([], 50)).toBeNull();
  });
});
