import { SessionBudget, ValidationError } from '@runledger/contracts';
import type { SessionTask } from '../log/task-views';
import { ReceivedForBudget, sessionBudgetFor } from './session-budget';

const task = (task_id: string, total_tokens: number, cost_usd = 0): SessionTask => ({
  task_id,
  status: 'completed',
  input: task_id,
  result: 'ok',
  stop_reason: 'completed',
  usage: { total_tokens, cost_usd },
});
const budget = (over: Partial<SessionBudget> = {}): SessionBudget => ({
  max_tokens: 1000,
  max_cost_usd: null,
  used_tokens: 0,
  used_cost_usd: 0,
  source: 'task',
  set_by: 't1',
  tasks_counted: 0,
  ...over,
});

describe('sessionBudgetFor', () => {
  const reads: string[] = [];
  const reader =
    (records: Record<string, ReceivedForBudget>) =>
    async (id: string): Promise<ReceivedForBudget | null> => {
      reads.push(id);
      return records[id] ?? null;
    };
  beforeEach(() => (reads.length = 0));

  it('a session none of whose tasks named a budget has none, and only its latest task is read', async () => {
    const sut = await sessionBudgetFor({
      task_id: 't4',
      asked: { max_tokens: 50 },
      earlier: [task('t1', 10), task('t2', 20), task('t3', 30)],
      received: reader({ t1: {}, t2: {}, t3: {} }),
    });
    expect(sut).toBeNull();
    expect(reads).toEqual(['t3']);
  });

  it('the first task that names one sets it, counting what the session spent before it', async () => {
    const sut = await sessionBudgetFor({
      task_id: 't3',
      asked: { session_max_tokens: 500, session_max_cost_usd: 0.5 },
      earlier: [task('t1', 10, 0.01), task('t2', 20, 0.02)],
      received: reader({ t1: {}, t2: {} }),
    });
    expect(sut).toEqual({
      max_tokens: 500,
      max_cost_usd: 0.5,
      used_tokens: 30,
      used_cost_usd: expect.closeTo(0.03, 10),
      source: 'task',
      set_by: 't3',
      tasks_counted: 2,
    });
  });

  it("delegated children are counted in their parents' spend, not again on their own", async () => {
    const sut = await sessionBudgetFor({
      task_id: 't3',
      asked: {},
      earlier: [task('t1', 100), task('child', 40), task('t2', 200)],
      received: reader({
        t1: { session_budget: budget() },
        child: { parent_task_id: 't1' },
        t2: { session_budget: budget({ used_tokens: 100, tasks_counted: 1 }) },
      }),
    });
    expect(sut).toMatchObject({ used_tokens: 300, tasks_counted: 2, set_by: 't1' });
  });

  it("counts on from the oldest task read that recorded the session's spend before it", async () => {
    // t0..t9 fell out of the read: t10 recorded what they had spent
    const sut = await sessionBudgetFor({
      task_id: 't13',
      asked: {},
      earlier: [task('t10', 5), task('t11', 6), task('t12', 7)],
      received: reader({
        t10: { session_budget: budget({ used_tokens: 900, tasks_counted: 10 }) },
        t11: { session_budget: budget({ used_tokens: 905, tasks_counted: 11 }) },
        t12: { session_budget: budget({ used_tokens: 911, tasks_counted: 12 }) },
      }),
    });
    expect(sut).toMatchObject({ used_tokens: 918, tasks_counted: 13 });
  });

  it("the session's setting comes before any task's, and a task naming other limits is refused", async () => {
    const setting = { max_tokens: 2000, max_cost_usd: null, source: 'setting' as const, set_by: null };
    const earlier = [task('t1', 100)];
    const received = reader({ t1: { session_budget: budget() } });
    await expect(
      sessionBudgetFor({ task_id: 't2', asked: {}, earlier, received, setting }),
    ).resolves.toMatchObject({ max_tokens: 2000, source: 'setting', set_by: null, used_tokens: 100 });
    await expect(
      sessionBudgetFor({ task_id: 't2', asked: { session_max_tokens: 1000 }, earlier, received, setting }),
    ).rejects.toThrow(ValidationError);
    await expect(
      sessionBudgetFor({ task_id: 't2', asked: { session_max_tokens: 2000 }, earlier, received, setting }),
    ).resolves.toMatchObject({ max_tokens: 2000 });
  });
});
