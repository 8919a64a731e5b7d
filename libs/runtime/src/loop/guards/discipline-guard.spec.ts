import { AcceptCheck, Budgets, RuntimeEvent } from '@runledger/contracts';
import { foldProgress } from '../../log/progress';
import { TaskFold } from '../../log/task-fold';
import { DisciplineGuard } from './discipline-guard';
import { FABRICATION_NOTE } from '../../discipline/completion';
import { DEFAULT_DISCIPLINE_SETTINGS } from '../../discipline/settings';
import { EventLogBuilder } from '../../discipline/testing-events';

const sut = new DisciplineGuard(
  { ...DEFAULT_DISCIPLINE_SETTINGS, repeatThreshold: 2, circuitBreakerThreshold: 2 },
  () => new Date('2026-01-01T00:00:10Z'),
);

function given(
  build: (log: EventLogBuilder) => void,
  opts: { budgets?: Budgets; accept_checks?: AcceptCheck[] } = {},
) {
  const log = new EventLogBuilder();
  log.received('x', { accept_checks: opts.accept_checks ?? [], budgets: opts.budgets ?? {} });
  build(log);
  const events: RuntimeEvent[] = log.events;
  const round = events.filter((e) => e.type === 'ROUTER_DECIDED').length + 1;
  const fold = new TaskFold('task_1', events);
  return { progress: fold.progress, events, fold, round };
}

describe('DisciplineGuard.beforeRound', () => {
  it('a legit run of 8 different successful tool calls is not stopped or reminded', async () => {
    const ctx = given((log) => {
      for (let i = 1; i <= 8; i++)
        log.toolRound('file_write', { path: `f${i}.txt`, content: `${i}` }, { bytes: 1 });
    });
    expect(await sut.beforeRound(ctx)).toEqual({ events: [] });
  });

  it('the round budget: round 4 of max_rounds 3 is refused', async () => {
    const ctx = given((log) => [1, 2, 3].forEach((i) => log.toolRound('echo', { text: `${i}` }, `${i}`)), {
      budgets: { max_rounds: 3 },
    });
    expect((await sut.beforeRound(ctx)).stop).toMatchObject({
      stop_reason: 'budget_exceeded',
      detail: expect.stringMatching(/all 3 rounds used/),
    });
  });

  it('the task timeout is a timeout stop', async () => {
    const ctx = given((log) => log.toolRound('echo', { text: '1' }, '1'), { budgets: { timeout_ms: 5000 } });
    expect((await sut.beforeRound(ctx)).stop).toMatchObject({ stop_reason: 'timeout' });
  });

  it('repeats: reminder once at the threshold, then repeat_cycle', async () => {
    const write = (log: EventLogBuilder) =>
      log.toolRound('file_write', { path: 'a', content: 'same' }, { bytes: 4 });
    const three = given((log) => [1, 2, 3].forEach(() => write(log)));
    const v = await sut.beforeRound(three);
    expect(v.stop).toBeUndefined();
    expect(v.events).toEqual([
      expect.objectContaining({
        type: 'GUARD_TRIGGERED',
        payload: expect.objectContaining({ guard: 'repeat_reminder', round: 3 }),
      }),
    ]);
    const reminded = given((log) => {
      [1, 2, 3].forEach(() => write(log));
      log.add('GUARD_TRIGGERED', v.events![0].payload as never);
    });
    expect((await sut.beforeRound(reminded)).events).toEqual([]);
    const again = given((log) => {
      [1, 2, 3].forEach(() => write(log));
      log.add('GUARD_TRIGGERED', v.events![0].payload as never);
      write(log);
    });
    expect((await sut.beforeRound(again)).stop).toMatchObject({ stop_reason: 'repeat_cycle' });
  });

  it('circuit breaker: told once, stops when the broken tool is called again and breaks again', async () => {
    const broken = (log: EventLogBuilder, i: number) =>
      log
        .decided({ type: 'tool', tool: 'net_fetch', args: { url: `u${i}` } })
        .toolFailed('net_fetch', { url: `u${i}` });
    const twice = given((log) => [1, 2].forEach((i) => broken(log, i)));
    const v = await sut.beforeRound(twice);
    expect(v.stop).toBeUndefined();
    expect(v.events).toEqual([
      expect.objectContaining({
        payload: expect.objectContaining({ guard: 'circuit_breaker', data: { tool: 'net_fetch' } }),
      }),
    ]);
    const told = given((log) => {
      [1, 2].forEach((i) => broken(log, i));
      log.add('GUARD_TRIGGERED', v.events![0].payload as never);
    });
    expect(await sut.beforeRound(told)).toEqual({ events: [] });
    const ignored = given((log) => {
      [1, 2].forEach((i) => broken(log, i));
      log.add('GUARD_TRIGGERED', v.events![0].payload as never);
      broken(log, 3);
    });
    expect((await sut.beforeRound(ignored)).stop).toMatchObject({ stop_reason: 'tool_error' });
  });
});

describe('DisciplineGuard.beforeEnd (accept gate)', () => {
  const check: AcceptCheck = {
    id: 'built',
    kind: 'file_exists',
    target: 'out.txt',
    match: null,
    required: true,
    params: {},
  };
  const completed = { stop_reason: 'completed' as const, detail: 'done' };

  it('passes: ACCEPTANCE_DECIDED recorded, the stop stays completed', async () => {
    const ctx = given(
      (log) => log.toolRound('file_write', { path: 'out.txt', content: 'x' }, { bytes: 1 }).responded('ok'),
      { accept_checks: [check] },
    );
    const v = await sut.beforeEnd({ ...ctx, stop: completed, result: 'ok' });
    expect(v.stop).toBeUndefined();
    expect(v.events).toEqual([
      {
        type: 'ACCEPTANCE_DECIDED',
        payload: { passed: true, results: [expect.objectContaining({ id: 'built', passed: true })] },
      },
    ]);
  });

  it('fails: accept_check_failed naming the check', async () => {
    const ctx = given((log) => log.responded('I wrote out.txt'), { accept_checks: [check] });
    const v = await sut.beforeEnd({ ...ctx, stop: completed, result: 'I wrote out.txt' });
    expect(v.stop).toMatchObject({
      stop_reason: 'accept_check_failed',
      detail: expect.stringMatching(/check built \(file_exists\)/),
    });
  });

  it('no checks, or a task that did not complete: nothing to judge', async () => {
    const ctx = given((log) => log.responded('ok'));
    expect(await sut.beforeEnd({ ...ctx, stop: completed, result: 'ok' })).toEqual({});
    const withChecks = given((log) => log.responded('ok'), { accept_checks: [check] });
    expect(
      await sut.beforeEnd({ ...withChecks, stop: { stop_reason: 'tool_error', detail: 'x' }, result: null }),
    ).toEqual({});
  });
});

describe('what the model is told (the progress fold behind its context)', () => {
  it('a reply with fabricated tool results: the cut is noted in the round it decided', () => {
    const log = new EventLogBuilder().received();
    log.add('CONTEXT_BUILT', {
      round: 1,
      sections: {},
      total_tokens: 0,
      budget_tokens: 0,
      cut: [],
      memory_hits: [],
      compacted: false,
    });
    log.add('GUARD_TRIGGERED', {
      guard: 'correction',
      round: 1,
      detail: FABRICATION_NOTE,
      data: { fabricated: 1 },
    });
    log.add('ROUTER_DECIDED', {
      round: 1,
      directive: { type: 'tool', tool: 'echo', args: {} },
      source: 'orchestrator',
      fallback_reason: null,
      attempts: 1,
    });
    const sut = foldProgress('task_1', log.events);
    expect(sut.history[0].results).toEqual([`note: ${FABRICATION_NOTE}`]);
    expect(sut.pendingNotes).toEqual([]);
  });

  it('a reminder round carries the reminder; a compaction summary replaces the rounds it covers', () => {
    const log = new EventLogBuilder()
      .received()
      .toolRound('echo', { text: 'a' }, 'a')
      .toolRound('echo', { text: 'b' }, 'b');
    log.add('GUARD_TRIGGERED', {
      guard: 'compaction',
      round: 3,
      detail: 'x',
      data: { rounds: [1, 2], summary: 'echoed a and b' },
    });
    log.add('CONTEXT_BUILT', {
      round: 3,
      sections: {},
      total_tokens: 0,
      budget_tokens: 0,
      cut: [],
      memory_hits: [],
      compacted: true,
    });
    log.add('GUARD_TRIGGERED', {
      guard: 'completion_reminder',
      round: 3,
      detail: 'answer with a directive',
      data: {},
    });
    const sut = foldProgress('task_1', log.events);
    expect(sut.history.map((h) => [h.round, h.results])).toEqual([
      [2, ['echoed a and b']],
      [3, ['note: answer with a directive']],
    ]);
    expect(sut.roundClosed).toBe(true);
  });
});
