import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { foldTaskState } from '@runledger/state-store';
import { meterFromEvents } from '../discipline/budgets';
import { completionStateFromEvents } from '../discipline/completion';
import { toolGuardFromEvents } from '../discipline/failure-policy';
import { repeatFold } from '../discipline/repeat-detector';
import { guardEvent } from '../discipline/retry-runner';
import { RoundFactsFold, roundsOf, toolFacts } from '../discipline/round-facts';
import { EventLogBuilder } from '../discipline/testing-events';
import { foldProgress } from './progress';
import { TaskFold } from './task-fold';
import { TaskWriter } from './task-writer';

const guard = (log: EventLogBuilder, e: NewEvent) =>
  e.type === 'GUARD_TRIGGERED' ? log.add('GUARD_TRIGGERED', e.payload) : log;

/** A task with a bit of everything the fold keeps: repeats, broken tools, reminders, a provider switch, model calls. */
function mixedLog(): EventLogBuilder {
  const log = new EventLogBuilder().received();
  const write = { path: 'a.txt', content: 'x' };
  for (let i = 0; i < 3; i++) log.toolRound('file_write', write, { bytes: 1 });
  guard(log, guardEvent('repeat_reminder', 3, 'repeating', { streak: 2 }));
  log.decided({ type: 'tool', tool: 'net_fetch', args: { url: 'a' } }).toolFailed('net_fetch', { url: 'a' });
  log.decided({ type: 'tool', tool: 'net_fetch', args: { url: 'b' } }).toolFailed('net_fetch', { url: 'b' });
  log.decided({ type: 'tool', tool: 'shell_exec', args: { command: 'sleep 9' } });
  log.toolFailed('shell_exec', { command: 'sleep 9' }, 'timeout');
  guard(log, guardEvent('circuit_breaker', 6, 'net_fetch broke', { tool: 'net_fetch' }));
  guard(log, guardEvent('completion_reminder', 7, 'no directive'));
  guard(
    log,
    guardEvent('fallback', 8, 'A failed; falling back to B', {
      role: 'orchestrator',
      kind: 'provider_error',
      from: 'A',
      to: 'B',
      attempts: 3,
    }),
  );
  log.add('MODEL_CALLED', {
    call_id: 'mc_1',
    role: 'orchestrator',
    model: 'm',
    backend: 'scripted',
    attempt: 1,
    round: 8,
    prompt_chars: 1000,
  });
  log.add('MODEL_RESPONDED', {
    call_id: 'mc_1',
    role: 'orchestrator',
    model: 'm',
    content: 'x'.repeat(300),
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, estimated: false },
    latency_ms: 5,
    error: null,
    finish_reason: 'stop',
    retry_after_ms: null,
    cost_usd: 0,
  });
  log.decided({ type: 'tool', tool: 'net_fetch', args: { url: 'c' } }).toolFailed('net_fetch', { url: 'c' });
  return log.responded('done');
}

describe('TaskFold', () => {
  const events = mixedLog().events;

  it('after every event, holds what folding the log up to it from scratch gives', () => {
    const sut = new TaskFold('task_1');
    events.forEach((e, i) => {
      sut.apply(e);
      const upTo = events.slice(0, i + 1);
      expect(sut.log).toEqual(upTo);
      expect(sut.progress).toEqual(foldProgress('task_1', upTo));
      expect(sut.meter().usage).toEqual(meterFromEvents(upTo).usage);
      // asked first midway: folds what came before once, then keeps up
      if (i >= events.length / 2)
        expect(sut.meter(3).usage).toEqual(meterFromEvents(upTo, { charsPerToken: 3 }).usage);
      const health = toolGuardFromEvents(upTo);
      expect(sut.toolGuard.consecutiveFailures).toEqual(health.consecutiveFailures);
      expect(sut.toolGuard.timeouts).toEqual(health.timeouts);
      expect(sut.completion).toEqual(completionStateFromEvents(upTo));
      expect(sut.facts.facts()).toEqual(toolFacts(upTo));
    });
  });

  it('judges repeats round by round as the detector does over the closed rounds of the whole log', () => {
    const sut = new TaskFold('task_1');
    const actions: string[] = [];
    for (const e of events) {
      if (e.type === 'CONTEXT_BUILT') {
        const closed = roundsOf(sut.log).filter((r) => r.round < e.payload.round);
        const { verdict, last } = sut.repeatBefore(e.payload.round, 2);
        expect(verdict).toEqual(repeatFold(closed, 2));
        expect(last).toEqual(closed[closed.length - 1]);
        actions.push(verdict.action);
      }
      sut.apply(e);
    }
    expect(actions).toContain('remind');
  });

  it('knows which guards spoke for which round, and a tool called again after its breaker was announced', () => {
    const sut = new TaskFold('task_1', events);
    expect(sut.guarded('repeat_reminder', 3)).toBe(true);
    expect(sut.guarded('repeat_reminder', 2)).toBe(false);
    expect(sut.circuitFailedSinceTold('net_fetch')).toBe(true);
    expect(sut.circuitFailedSinceTold('shell_exec')).toBeNull();
    const beforeAgain = new TaskFold(
      'task_1',
      events.slice(
        0,
        events.findIndex((e) => e.type === 'MODEL_CALLED'),
      ),
    );
    expect(beforeAgain.circuitFailedSinceTold('net_fetch')).toBe(false);
  });

  it('keeps the public state as the tasks projection folds it, through the events the log holds', () => {
    const sut = new TaskFold('task_1', events.slice(0, 3));
    expect(sut.state).toEqual(foldTaskState(events.slice(0, 3)));
    // applied (folded ahead of the log) moves the run's state only; committed moves the public state
    for (const e of events.slice(3)) sut.apply(e);
    expect(sut.state).toEqual(foldTaskState(events.slice(0, 3)));
    for (const e of events.slice(3)) sut.committed(e);
    expect(sut.state).toEqual(foldTaskState(events));
    expect(sut.state?.status).not.toBe('queued');
    // a fold started again keeps the public state it is handed, not one folded from its events
    const kept = new TaskFold('task_1', events, foldTaskState(events.slice(0, 1)));
    expect(kept.state).toEqual(foldTaskState(events.slice(0, 1)));
  });

  it('keeps the latest decision and the provider switches per role', () => {
    const sut = new TaskFold('task_1', events);
    expect(sut.lastDecision?.directive).toEqual({ type: 'respond', content: 'done' });
    expect(sut.providers.chainStart(['A', 'B'], 'orchestrator')).toBe(1);
    expect(sut.providers.chainStart(['A', 'B'], 'coder')).toBe(0);
    expect(sut.providers.lastSwitch('orchestrator')).toBe('A failed; falling back to B');
    expect(sut.providers.lastSwitch('coder')).toBeNull();
  });
});

describe('TaskWriter fold', () => {
  const stored = (store: InMemoryEventStore, taskId: string): Promise<RuntimeEvent[]> =>
    store.readWholeStream(taskId);
  const plain = (events: readonly RuntimeEvent[]): NewEvent[] =>
    events.map((e) => ({ type: e.type, payload: e.payload }) as NewEvent);

  it('folds the existing log once on open and applies what it appends and what others appended', async () => {
    const store = new InMemoryEventStore();
    const [first, ...rest] = plain(mixedLog().events);
    await store.append('task_1', [first], { expected: 'no_stream' });
    await store.append('task_1', rest.slice(0, 5), { expected: 1 });
    const sut = await TaskWriter.open(store, 'task_1');
    expect(sut.progress).toEqual(foldProgress('task_1', await stored(store, 'task_1')));

    await sut.append(rest.slice(5, 10));
    // someone else appends behind the writer's back; the next append catches up first
    await store.append('task_1', rest.slice(10, 12), { expected: 11 });
    await sut.append(rest.slice(12));

    const all = await stored(store, 'task_1');
    expect(all.map((e) => e.type)).toEqual(mixedLog().events.map((e) => e.type));
    const fresh = new TaskFold('task_1', all);
    expect(sut.log).toEqual(all);
    expect(sut.progress).toEqual(fresh.progress);
    expect(sut.fold.toolGuard).toEqual(fresh.toolGuard);
    expect(sut.fold.completion).toEqual(fresh.completion);
    expect(sut.fold.facts.facts()).toEqual(fresh.facts.facts());
    expect(sut.fold.repeatBefore(99, 2)).toEqual(fresh.repeatBefore(99, 2));
  });
});

describe('RoundFactsFold', () => {
  it('a retried call is one fact, its latest attempt, last in log order and in its round once', () => {
    const log = new EventLogBuilder().received();
    const called = (call_id: string, attempt: number) =>
      log.add('TOOL_CALLED', {
        call_id,
        tool: 'echo',
        args: { text: call_id },
        args_hash: `h_${call_id}`,
        step_id: null,
        idempotent: true,
        attempt,
      });
    // a call before any decision belongs to no round
    called('call_0', 1);
    log.decided({ type: 'plan', steps: [] });
    called('call_1_a', 1);
    called('call_1_b', 1);
    called('call_1_a', 2);
    log.add('TOOL_COMPLETED', {
      call_id: 'call_1_a',
      tool: 'echo',
      result: { tool: 'echo', ok: true, output: 'a', error: null, metadata: {} },
      duration_ms: 1,
    });
    const sut = RoundFactsFold.of(log.events);
    expect(sut.facts().map((f) => [f.call_id, f.round, f.ok])).toEqual([
      ['call_0', null, null],
      ['call_1_b', 1, null],
      ['call_1_a', 1, true],
    ]);
    expect(sut.rounds).toHaveLength(1);
    expect(sut.rounds[0].tools.map((f) => f.call_id)).toEqual(['call_1_b', 'call_1_a']);
  });
});
