import {
  AcceptCheck,
  Budgets,
  EventType,
  ExecutionDirective,
  RuntimeEvent,
  StopReason,
  TaskStatus,
  TaskUsage,
  addChildUsage,
  addRoleUsage,
  emptyUsage,
  isTerminalStatus,
} from '@runledger/contracts';

/** A question the task is waiting on a human for, bound to its tool call. */
export interface PendingRequest {
  kind: 'permission' | 'secret';
  request_id: string;
  call_id: string;
  tool: string;
  /** permission only: the arguments and their hash the decision binds to */
  args?: Record<string, unknown>;
  args_hash?: string;
  /** permission only: what an allow_always answer would cover */
  covers?: string;
  /** secret only */
  secret_name?: string;
  reason: string;
}

/** The task-state projection: a pure fold of the task's events. Plain JSON. */
export interface TaskState {
  task_id: string;
  status: TaskStatus;
  session_id: string;
  input: string;
  last_directive: ExecutionDirective | null;
  pending_requests: PendingRequest[];
  stop_reason: StopReason | null;
  stop_detail: string | null;
  result: string | null;
  usage: TaskUsage;
  rounds: number;
  last_seq: number;
  idempotency_key: string | null;
  request_hash: string | null;
  accept_checks: AcceptCheck[];
  budgets: Budgets;
  created_at: string;
  updated_at: string;
}

const blank = (e: RuntimeEvent): TaskState => ({
  task_id: e.task_id,
  status: 'queued',
  session_id: e.session_id,
  input: '',
  last_directive: null,
  pending_requests: [],
  stop_reason: null,
  stop_detail: null,
  result: null,
  usage: emptyUsage(),
  rounds: 0,
  last_seq: 0,
  idempotency_key: null,
  request_hash: null,
  accept_checks: [],
  budgets: {},
  created_at: e.created_at,
  updated_at: e.created_at,
});

/** Status once a pending request is gone: the next one still open, else running. */
const statusFor = (pending: readonly PendingRequest[]): TaskStatus =>
  pending.length === 0
    ? 'running'
    : pending[0].kind === 'permission'
      ? 'awaiting_permission'
      : 'awaiting_secret';

/** Waiting on a new question (a re-asked request replaces its earlier copy). */
const awaiting = (s: TaskState, request: PendingRequest): TaskState => ({
  ...s,
  status: request.kind === 'permission' ? 'awaiting_permission' : 'awaiting_secret',
  pending_requests: [...s.pending_requests.filter((r) => r.request_id !== request.request_id), request],
});

/** Status after any event that is neither a question, an answer nor an end: the first one starts the task. */
const progressed = (s: TaskState): TaskStatus => (s.status === 'queued' ? 'running' : s.status);

/**
 * evolve: one event into the task state. Pure: never mutates its input. A
 * terminal task stays terminal (late events only move last_seq); a stream
 * that does not start with TASK_RECEIVED (a test stream, a fragment) still
 * folds, from a blank state.
 */
export function evolve(state: TaskState | null, e: RuntimeEvent): TaskState {
  const s: TaskState = { ...(state ?? blank(e)), last_seq: e.sequence, updated_at: e.created_at };
  if (isTerminalStatus(s.status)) return s;
  const type: EventType = e.type;
  switch (e.type) {
    case 'TASK_RECEIVED':
      return {
        ...s,
        status: 'queued',
        session_id: e.payload.session_id,
        input: e.payload.input,
        idempotency_key: e.payload.idempotency_key,
        request_hash: e.payload.request_hash,
        accept_checks: e.payload.accept_checks,
        budgets: e.payload.budgets,
        created_at: state?.created_at ?? e.created_at,
      };
    case 'ROUTER_DECIDED': {
      // rounds are numbered from 1; a re-decided round (retry, resume) is not counted twice
      const rounds = Math.max(s.rounds, e.payload.round);
      return {
        ...s,
        status: progressed(s),
        last_directive: e.payload.directive,
        rounds,
        usage: { ...s.usage, rounds },
      };
    }
    case 'MODEL_CALLED':
      return {
        ...s,
        status: progressed(s),
        usage: {
          ...s.usage,
          model_calls: s.usage.model_calls + 1,
          by_role: addRoleUsage(s.usage, e.payload.role, { model_calls: 1 }),
        },
      };
    case 'MODEL_RESPONDED': {
      const { usage: tokens, role, error } = e.payload;
      const cost = e.payload.cost_usd ?? 0;
      return {
        ...s,
        status: progressed(s),
        usage: {
          ...s.usage,
          failures: s.usage.failures + (error ? 1 : 0),
          prompt_tokens: s.usage.prompt_tokens + tokens.prompt_tokens,
          completion_tokens: s.usage.completion_tokens + tokens.completion_tokens,
          total_tokens: s.usage.total_tokens + tokens.total_tokens,
          cost_usd: s.usage.cost_usd + cost,
          by_role: addRoleUsage(s.usage, role, {
            prompt_tokens: tokens.prompt_tokens,
            completion_tokens: tokens.completion_tokens,
            cost_usd: cost,
          }),
        },
      };
    }
    case 'TOOL_CALLED':
      return { ...s, status: progressed(s), usage: { ...s.usage, tool_calls: s.usage.tool_calls + 1 } };
    case 'TOOL_FAILED':
      return { ...s, status: progressed(s), usage: { ...s.usage, failures: s.usage.failures + 1 } };
    case 'CHILD_TASK_ENDED':
      return { ...s, status: progressed(s), usage: addChildUsage(s.usage, e.payload.usage) };
    case 'TASK_AWAITING_PERMISSION': {
      const { request_id, call_id, tool, args, args_hash, reason, covers } = e.payload;
      return awaiting(s, {
        kind: 'permission',
        request_id,
        call_id,
        tool,
        args,
        args_hash,
        reason,
        ...(covers ? { covers } : {}),
      });
    }
    case 'TASK_AWAITING_SECRET': {
      const { request_id, call_id, tool, secret_name, reason } = e.payload;
      return awaiting(s, { kind: 'secret', request_id, call_id, tool, secret_name, reason });
    }
    case 'PERMISSION_RESOLVED':
    case 'SECRET_PROVIDED': {
      const pending = s.pending_requests.filter((r) => r.request_id !== e.payload.request_id);
      return { ...s, pending_requests: pending, status: statusFor(pending) };
    }
    case 'TIMER_SET':
      return { ...s, status: 'waiting' };
    case 'TIMER_FIRED':
      return { ...s, status: statusFor(s.pending_requests) };
    case 'TASK_COMPLETED':
    case 'TASK_FAILED':
    case 'TASK_CANCELLED':
      return {
        ...s,
        status: e.type === 'TASK_COMPLETED' ? 'completed' : e.type === 'TASK_FAILED' ? 'failed' : 'cancelled',
        stop_reason: e.payload.stop_reason,
        stop_detail: e.payload.detail,
        result: 'result' in e.payload ? (e.payload.result ?? null) : null,
        // the final usage is the runtime's meter, authoritative (it also estimates unreported tokens)
        usage: e.payload.usage,
        rounds: e.payload.usage.rounds,
        pending_requests: [],
      };
    case 'CONTEXT_BUILT':
    case 'PLAN_STARTED':
    case 'PLAN_COMPLETED':
    case 'PLAN_FAILED':
    case 'STEP_STARTED':
    case 'STEP_COMPLETED':
    case 'STEP_FAILED':
    case 'TOOL_COMPLETED':
    case 'CRITIC_RESULT':
    case 'MEMORY_WRITTEN':
    case 'ACCEPTANCE_DECIDED':
    case 'OUTPUT_CHUNK':
    case 'GUARD_TRIGGERED':
    case 'CHILD_TASK_STARTED':
    case 'REMOTE_TASK_UPDATED':
    case 'TODO_ADDED':
    case 'TODO_UPDATED':
      return { ...s, status: progressed(s) };
    // outbound deliveries live in their own streams, never a task's
    case 'CHECKPOINT_SAVED':
    case 'CALLBACK_REGISTERED':
    case 'CALLBACK_REMOVED':
    case 'DELIVERY_STARTED':
    case 'DELIVERY_SUCCEEDED':
    case 'DELIVERY_FAILED':
      return s;
    default:
      return assertNever(e, type);
  }
}

function assertNever(_: never, type: EventType): never {
  throw new Error(`evolve: unhandled event type ${type}`);
}

/** Fold a stream (or its tail, from a snapshot) into a state. */
export const foldTaskState = (
  events: readonly RuntimeEvent[],
  from: TaskState | null = null,
): TaskState | null => events.reduce<TaskState | null>(evolve, from);
