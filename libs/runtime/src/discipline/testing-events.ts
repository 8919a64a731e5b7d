import { AcceptCheck, EventPayload, EventType, RuntimeEvent, hashArgs } from '@runledger/contracts';

/** A TASK_RECEIVED payload as a submission over the API records it, with `extra` over the defaults. */
export const taskReceivedPayload = (
  input: string,
  extra: Partial<EventPayload<'TASK_RECEIVED'>> = {},
): EventPayload<'TASK_RECEIVED'> => ({
  input,
  session_id: 'ses_1',
  accept_checks: [],
  budgets: {},
  idempotency_key: null,
  request_hash: null,
  source: 'api',
  forked_from: null,
  ...extra,
});

/**
 * Builds a task's event log for the guards' unit tests, envelopes filled in
 * and sequence gap-free, so each test reads as the log it judges.
 */
export class EventLogBuilder {
  readonly events: RuntimeEvent[] = [];
  private calls = 0;
  private round = 0;

  constructor(
    readonly taskId = 'task_1',
    private readonly startedAt = new Date('2026-01-01T00:00:00Z'),
  ) {}

  add<T extends EventType>(type: T, payload: EventPayload<T>, atMs = 0): this {
    const sequence = this.events.length + 1;
    this.events.push({
      event_id: `evt_${sequence}`,
      task_id: this.taskId,
      session_id: 'ses_1',
      sequence,
      position: sequence,
      type,
      payload,
      causation_id: null,
      correlation_id: this.taskId,
      created_at: new Date(this.startedAt.getTime() + atMs).toISOString(),
    } as RuntimeEvent);
    return this;
  }

  received(input = 'do it', extra: Partial<EventPayload<'TASK_RECEIVED'>> = {}): this {
    return this.add('TASK_RECEIVED', taskReceivedPayload(input, extra));
  }

  decided(directive: EventPayload<'ROUTER_DECIDED'>['directive']): this {
    this.round += 1;
    this.add('CONTEXT_BUILT', {
      round: this.round,
      sections: {},
      total_tokens: 0,
      budget_tokens: 0,
      cut: [],
      memory_hits: [],
      compacted: false,
    });
    return this.add('ROUTER_DECIDED', {
      round: this.round,
      directive,
      source: 'orchestrator',
      fallback_reason: null,
      attempts: 1,
    });
  }

  /** a whole tool round: ROUTER_DECIDED, TOOL_CALLED, TOOL_COMPLETED */
  toolRound(tool: string, args: Record<string, unknown>, output: unknown, ok = true): this {
    return this.decided({ type: 'tool', tool, args }).tool(tool, args, output, ok);
  }

  /** ok:false is recorded as the engine does: TOOL_FAILED (tool_error) carrying the result */
  tool(tool: string, args: Record<string, unknown>, output: unknown, ok = true): this {
    const call_id = this.called(tool, args);
    const result = { tool, ok, output, error: ok ? null : 'failed', metadata: {} };
    if (!ok)
      return this.add('TOOL_FAILED', {
        call_id,
        tool,
        result,
        error: 'failed',
        error_kind: 'tool_error',
        duration_ms: 1,
      });
    return this.add('TOOL_COMPLETED', { call_id, tool, result, duration_ms: 1 });
  }

  toolFailed(
    tool: string,
    args: Record<string, unknown>,
    error_kind: EventPayload<'TOOL_FAILED'>['error_kind'] = 'tool_error',
  ): this {
    const call_id = this.called(tool, args);
    return this.add('TOOL_FAILED', {
      call_id,
      tool,
      result: null,
      error: `${tool} ${error_kind}`,
      error_kind,
      duration_ms: 1,
    });
  }

  private called(tool: string, args: Record<string, unknown>): string {
    this.calls += 1;
    const call_id = `call_${this.calls}`;
    this.add('TOOL_CALLED', {
      call_id,
      tool,
      args,
      args_hash: hashArgs(tool, args),
      step_id: null,
      idempotent: false,
      attempt: 1,
    });
    return call_id;
  }

  responded(content: string): this {
    return this.decided({ type: 'respond', content });
  }
}

/** An acceptance check of `kind`, required, with `patch` over the defaults; for the accept gate's tests. */
export const acceptCheck = (kind: AcceptCheck['kind'], patch: Partial<AcceptCheck> = {}): AcceptCheck => ({
  id: `c_${kind}`,
  kind,
  target: '',
  match: null,
  required: true,
  params: {},
  ...patch,
});
