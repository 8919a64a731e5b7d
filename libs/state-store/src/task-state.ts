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

/** A question the task is waiting on a human (or the client, for a tool it offered) for, bound to its tool call. */
export interface PendingRequest {
  kind: 'permission' | 'secret' | 'client_tool';
  request_id: string;
  call_id: string;
  tool: string;
  /** permission: the arguments and their hash the decision binds to; client_tool: the call's arguments */
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

const AWAITING_STATUS: Record<PendingRequest['kind'], TaskStatus> = {
  permission: 'awaiting_permission',
  secret: 'awaiting_secret',
  client_tool: 'awaiting_client_tool',
};

/**
 * Status once a pending request is gone: the first person's question still open, else the client's
 * tools still running, else running.
 */
const statusFor = (pending: readonly PendingRequest[]): TaskStatus => {
  const person = pending.find((r) => r.kind !== 'client_tool');
  return person ? AWAITING_STATUS[person.kind] : pending.length ? 'awaiting_client_tool' : 'running';
};

/**
 * Waiting on a new question (a re-asked request replaces its earlier copy). A client tool's call
 * asked while a person's question is open leaves the task waiting for the person.
 */
const awaiting = (s: TaskState, request: PendingRequest): TaskState => ({
  ...s,
  status:
    request.kind === 'client_tool' && (s.status === 'awaiting_permission' || s.status === 'awaiting_secret')
      ? s.status
      : AWAITING_STATUS[request.kind],
  pending_requests: [...s.pending_requests.filter((r) => r.request_id !== request.request_id), request],
});

/** A tool outcome that answers a client-tool request closes that request. */
const answered = (s: TaskState, requestId: string | undefined): TaskState => {
  if (requestId === undefined) return { ...s, status: progressed(s) };
  const pending = s.pending_requests.filter((r) => r.request_id !== requestId);
  return { ...s, pending_requests: pending, status: statusFor(pending) };
};

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
      return answered({ ...s, usage: { ...s.usage, failures: s.usage.failures + 1 } }, e.payload.request_id);
    case 'TOOL_COMPLETED':
      return answered(s, e.payload.request_id);
    case 'TASK_AWAITING_CLIENT_TOOL': {
      const { request_id, call_id, tool, args, reason } = e.payload;
      return awaiting(s, { kind: 'client_tool', request_id, call_id, tool, args, reason });
    }
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
    case 'SIGNAL_AWAITED':
      return { ...s, status: 'waiting' };
    case 'TIMER_FIRED':
      return { ...s, status: statusFor(s.pending_requests) };
    case 'SIGNAL_DELIVERED':
      // a delivery that ended the wait; one to a wait already over (a race's second) moves nothing
      return s.status === 'waiting' ? { ...s, status: statusFor(s.pending_requests) } : s;
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
    case 'CRITIC_RESULT':
    case 'MEMORY_WRITTEN':
    case 'ACCEPTANCE_DECIDED':
    case 'OUTPUT_CHUNK':
    case 'REASONING_CHUNK':
    case 'GUARD_TRIGGERED':
    case 'CHILD_TASK_STARTED':
    case 'REMOTE_TASK_UPDATED':
    case 'TODO_ADDED':
    case 'TODO_UPDATED':
    case 'ANSWER_EVALUATED':
      return { ...s, status: progressed(s) };
    // a signal is kept until a wait takes it: its arrival alone moves nothing; a queued task stays
    // queued until it runs; an interrupted one shows where it stood until it ends
    case 'SIGNAL_RECEIVED':
    case 'SESSION_TURN_BEGAN':
    case 'INTERRUPT_REQUESTED':
      return s;
    // outbound deliveries, the archive's record and a session's settings and rollbacks live in their
    // own streams, never a task's
    case 'CHECKPOINT_SAVED':
    case 'CALLBACK_REGISTERED':
    case 'CALLBACK_REMOVED':
    case 'DELIVERY_STARTED':
    case 'DELIVERY_SUCCEEDED':
    case 'DELIVERY_FAILED':
    case 'TASKS_ARCHIVED':
    case 'TASKS_RESTORED':
    case 'TASKS_CATALOGUED':
    case 'SESSION_ERASED':
    case 'TASK_TREE_ERASED':
    case 'SESSION_CONFIGURED':
    case 'TASK_ROLLED_BACK':
    case 'SCHEDULE_CREATED':
    case 'SCHEDULE_PAUSED':
    case 'SCHEDULE_RESUMED':
    case 'SCHEDULE_DELETED':
    case 'SCHEDULE_FIRED':
    case 'HOOK_RECEIVED':
    case 'SESSION_BUDGET_SET':
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
