import { EventPayload, EventType, RuntimeEvent, emptyUsage } from '@runledger/contracts';

/**
 * Builds a task's stored events in order (sequence, position, times filled),
 * for folding tests without a store.
 */
export class TaskLog {
  readonly events: RuntimeEvent[] = [];
  private clock = Date.parse('2026-01-01T00:00:00Z');

  constructor(
    readonly taskId = 'task_1',
    readonly sessionId = 'ses_1',
  ) {}

  add<T extends EventType>(type: T, payload: EventPayload<T>): this {
    const sequence = this.events.length + 1;
    this.events.push({
      event_id: `evt_${this.taskId}_${sequence}`,
      task_id: this.taskId,
      session_id: this.sessionId,
      sequence,
      position: sequence,
      type,
      payload,
      causation_id: null,
      correlation_id: this.taskId,
      created_at: new Date((this.clock += 1000)).toISOString(),
    } as RuntimeEvent);
    return this;
  }

  received(input = 'list files', extra: Partial<EventPayload<'TASK_RECEIVED'>> = {}): this {
    return this.add('TASK_RECEIVED', {
      input,
      session_id: this.sessionId,
      accept_checks: [],
      budgets: {},
      idempotency_key: null,
      request_hash: null,
      source: 'api',
      forked_from: null,
      ...extra,
    });
  }

  context(round: number): this {
    return this.add('CONTEXT_BUILT', {
      round,
      sections: {},
      total_tokens: 10,
      budget_tokens: 100,
      cut: [],
      memory_hits: [],
      compacted: false,
    });
  }

  decided(round: number, content = 'hello'): this {
    return this.add('ROUTER_DECIDED', {
      round,
      directive: { type: 'respond', content },
      source: 'orchestrator',
      fallback_reason: null,
      attempts: 1,
    });
  }

  model(
    callId: string,
    prompt: number,
    completion: number,
    cost = 0.01,
    error: EventPayload<'MODEL_RESPONDED'>['error'] = null,
  ): this {
    this.add('MODEL_CALLED', {
      call_id: callId,
      role: 'orchestrator',
      model: 'm',
      backend: 'scripted',
      attempt: 1,
      round: null,
      prompt_chars: 40,
    });
    return this.add('MODEL_RESPONDED', {
      call_id: callId,
      role: 'orchestrator',
      model: 'm',
      content: '{}',
      usage: {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
        estimated: false,
      },
      latency_ms: 5,
      error,
      finish_reason: 'stop',
      retry_after_ms: null,
      cost_usd: cost,
    });
  }

  tool(callId: string, ok = true): this {
    this.add('TOOL_CALLED', {
      call_id: callId,
      tool: 'fs.read',
      args: { path: 'a' },
      args_hash: 'h',
      step_id: null,
      idempotent: true,
      attempt: 1,
    });
    return ok
      ? this.add('TOOL_COMPLETED', {
          call_id: callId,
          tool: 'fs.read',
          result: { tool: 'fs.read', ok: true, output: 'x', error: null, metadata: {} },
          duration_ms: 1,
        })
      : this.add('TOOL_FAILED', {
          call_id: callId,
          tool: 'fs.read',
          result: null,
          error: 'boom',
          error_kind: 'tool_error',
          duration_ms: 1,
        });
  }

  askPermission(requestId: string, callId = 'call_p'): this {
    return this.add('TASK_AWAITING_PERMISSION', {
      request_id: requestId,
      call_id: callId,
      tool: 'shell',
      args: { cmd: 'ls' },
      args_hash: 'ah',
      rule: null,
      reason: 'shell needs approval',
    });
  }

  resolvePermission(requestId: string, callId = 'call_p'): this {
    return this.add('PERMISSION_RESOLVED', {
      request_id: requestId,
      call_id: callId,
      decision: 'allow_once',
      args_hash: 'ah',
      tool: 'shell',
    });
  }

  askSecret(requestId: string): this {
    return this.add('TASK_AWAITING_SECRET', {
      request_id: requestId,
      call_id: 'call_s',
      tool: 'http',
      secret_name: 'API_KEY',
      reason: 'needs a key',
    });
  }

  provideSecret(requestId: string): this {
    return this.add('SECRET_PROVIDED', { request_id: requestId, call_id: 'call_s', secret_name: 'API_KEY' });
  }

  /** a `wait` until the given time: the task waits on a timer (TIMER_SET is its last event) */
  waitUntil(until: string): this {
    return this.add('TIMER_SET', {
      timer_id: `tmr_${this.taskId}`,
      step_id: 'wait',
      due_at: until,
      duration_ms: null,
      until,
      counts_against_timeout: false,
    });
  }

  completed(result = 'done', rounds = 1): this {
    return this.add('TASK_COMPLETED', {
      stop_reason: 'completed',
      detail: 'answered',
      result,
      usage: { ...emptyUsage(), rounds, model_calls: 1 },
    });
  }

  failed(): this {
    return this.add('TASK_FAILED', {
      stop_reason: 'budget_exceeded',
      detail: 'max_rounds',
      result: null,
      usage: emptyUsage(),
    });
  }

  cancelled(): this {
    return this.add('TASK_CANCELLED', { stop_reason: 'cancelled', detail: 'by user', usage: emptyUsage() });
  }
}
