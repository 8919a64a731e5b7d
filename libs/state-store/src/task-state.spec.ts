import { EVENT_TYPES, RuntimeEvent } from '@runledger/contracts';
import { TaskState, evolve, foldTaskState } from './task-state';
import { TaskLog } from './testing/task-events';

const fold = (log: TaskLog): TaskState => foldTaskState(log.events)!;

describe('evolve (task state fold)', () => {
  it('TASK_RECEIVED creates a queued task with its input, session, idempotency data, checks and budgets', () => {
    const log = new TaskLog('t1', 'ses_9').received('say hi', {
      idempotency_key: 'key-1',
      request_hash: 'rh',
      budgets: { max_rounds: 3 },
      accept_checks: [{ id: 'a', kind: 'output_only', target: '', match: 'hi', required: true, params: {} }],
    });
    const sut = fold(log);
    expect(sut).toMatchObject({
      task_id: 't1',
      status: 'queued',
      session_id: 'ses_9',
      input: 'say hi',
      idempotency_key: 'key-1',
      request_hash: 'rh',
      budgets: { max_rounds: 3 },
      last_seq: 1,
      pending_requests: [],
      stop_reason: null,
      result: null,
    });
    expect(sut.accept_checks).toHaveLength(1);
    expect(sut.created_at).toBe(log.events[0].created_at);
  });

  it('the first runtime event moves it to running; rounds and usage follow the router, model and tool events', () => {
    const sut = fold(
      new TaskLog()
        .received()
        .context(1)
        .decided(1)
        .model('m1', 10, 5, 0.5)
        .tool('c1')
        .decided(1)
        .context(2)
        .decided(2)
        .model('m2', 3, 2, 0.25)
        .tool('c2', false),
    );
    expect(sut.status).toBe('running');
    expect(sut.rounds).toBe(2);
    expect(sut.last_directive).toEqual({ type: 'respond', content: 'hello' });
    expect(sut.usage).toMatchObject({
      rounds: 2,
      model_calls: 2,
      tool_calls: 2,
      failures: 1,
      prompt_tokens: 13,
      completion_tokens: 7,
      total_tokens: 20,
      cost_usd: 0.75,
    });
    expect(sut.usage.by_role.orchestrator).toEqual({
      model_calls: 2,
      prompt_tokens: 13,
      completion_tokens: 7,
      cost_usd: 0.75,
    });
  });

  it('a failed model call counts as a failure', () => {
    const sut = fold(
      new TaskLog().received().model('m1', 0, 0, 0, { kind: 'provider_error', message: '503' }),
    );
    expect(sut.usage.failures).toBe(1);
  });

  it('waits for permission and secrets with the pending requests, and resumes when they are answered', () => {
    const log = new TaskLog().received().context(1).askPermission('req_1');
    const waiting = fold(log);
    expect(waiting.status).toBe('awaiting_permission');
    expect(waiting.pending_requests).toEqual([
      {
        kind: 'permission',
        request_id: 'req_1',
        call_id: 'call_p',
        tool: 'shell',
        args: { cmd: 'ls' },
        args_hash: 'ah',
        reason: 'shell needs approval',
      },
    ]);

    log.resolvePermission('req_1').askSecret('req_2');
    const secret = fold(log);
    expect(secret.status).toBe('awaiting_secret');
    expect(secret.pending_requests).toEqual([
      {
        kind: 'secret',
        request_id: 'req_2',
        call_id: 'call_s',
        tool: 'http',
        secret_name: 'API_KEY',
        reason: 'needs a key',
      },
    ]);

    log.provideSecret('req_2');
    expect(fold(log)).toMatchObject({ status: 'running', pending_requests: [] });
  });

  it('an answer to one of two pending requests leaves the task waiting on the other', () => {
    const sut = fold(
      new TaskLog()
        .received()
        .askPermission('req_1', 'c1')
        .askSecret('req_2')
        .resolvePermission('req_1', 'c1'),
    );
    expect(sut.status).toBe('awaiting_secret');
    expect(sut.pending_requests.map((r) => r.request_id)).toEqual(['req_2']);
  });

  it.each([
    [
      'TASK_COMPLETED',
      (l: TaskLog) => l.completed('the answer', 4),
      {
        status: 'completed',
        stop_reason: 'completed',
        stop_detail: 'answered',
        result: 'the answer',
        rounds: 4,
      },
    ],
    [
      'TASK_FAILED',
      (l: TaskLog) => l.failed(),
      { status: 'failed', stop_reason: 'budget_exceeded', stop_detail: 'max_rounds', result: null },
    ],
    [
      'TASK_CANCELLED',
      (l: TaskLog) => l.cancelled(),
      { status: 'cancelled', stop_reason: 'cancelled', stop_detail: 'by user', result: null },
    ],
  ])(
    '%s ends the task with its stop reason, result and final usage, clearing pending requests',
    (_type, end, expected) => {
      const sut = fold(end(new TaskLog().received().askPermission('req_1')));
      expect(sut).toMatchObject({ ...expected, pending_requests: [] });
      expect(sut.usage.rounds).toBe(sut.rounds);
    },
  );

  it('a terminal task stays terminal; later events only move last_seq', () => {
    const sut = fold(new TaskLog().received().completed().askPermission('late').decided(9));
    expect(sut).toMatchObject({ status: 'completed', pending_requests: [], rounds: 1, last_seq: 4 });
  });

  it('is pure: the previous state is never mutated', () => {
    const log = new TaskLog().received().model('m1', 1, 1).askPermission('r');
    const states: TaskState[] = [];
    let s: TaskState | null = null;
    for (const e of log.events) {
      const snapshot = s === null ? null : structuredClone(s);
      const next = evolve(s, e);
      expect(s).toEqual(snapshot);
      states.push(next);
      s = next;
    }
    expect(states.map((x) => x.status)).toEqual(['queued', 'running', 'running', 'awaiting_permission']);
  });

  it('folds a stream that does not start with TASK_RECEIVED from a blank state', () => {
    const log = new TaskLog('t2', 'ses_2').received();
    const sut = evolve(null, {
      ...log.events[0],
      type: 'OUTPUT_CHUNK',
      payload: { call_id: 'c', index: 0, delta: 'x' },
    } as RuntimeEvent);
    expect(sut).toMatchObject({ task_id: 't2', session_id: 'ses_2', status: 'running', input: '' });
  });

  it('handles every event type in the catalogue', () => {
    const log = new TaskLog().received();
    for (const type of EVENT_TYPES) {
      expect(() => evolve(fold(log), { ...log.events[0], sequence: 2, type } as RuntimeEvent)).not.toThrow(
        /unhandled/,
      );
    }
  });
});
