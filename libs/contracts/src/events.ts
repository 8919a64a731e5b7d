import { z } from 'zod';
import { ValidationError } from './errors';
import { AgentName, ExecutionDirective, ModelToolCall, PlanStep } from './directive';
import { AgentProfile } from './agents';
import { MemoryKind, CriticScore } from './memory';
import { PermissionDecision } from './permission';
import {
  AcceptCheck,
  AgUiRun,
  Budgets,
  Role,
  RunSettings,
  SessionBudget,
  SessionTurn,
  StopReason,
  TaskUsage,
  ModelContinuation,
  MutationIntent,
  OnBusy,
  ScheduleSpec,
  TodoOwner,
  TodoStatus,
  TokenUsage,
  ToolSurface,
} from './task';
import { ToolResult } from './tool';

/**
 * The event catalogue: one payload schema per event type. An event whose type
 * is not listed here, or whose payload does not parse, can never be appended.
 */
const Json = z.unknown();
const Id = z.string().min(1).max(200);

/** An A2A task's state as a delegating task records it. */
export const RemoteTaskState = z.enum([
  'submitted',
  'working',
  'input-required',
  'auth-required',
  'completed',
  'failed',
  'canceled',
  'rejected',
  'unknown',
]);
export type RemoteTaskState = z.infer<typeof RemoteTaskState>;

const StepResultSummary = z.object({
  step_id: Id,
  status: z.enum(['completed', 'failed', 'skipped', 'pending']),
  output: Json.optional(),
  error: z.string().nullable().optional(),
});

const ErrorInfo = z.object({ kind: z.string(), message: z.string() });

const FinalPayload = {
  stop_reason: StopReason,
  detail: z.string(),
  usage: TaskUsage,
};

/**
 * A file as the accept gate found it in the allowed root (symlinks resolved, never outside it):
 * whether it exists, its size, the sha256 of its text as read (null when only part was read), and
 * for content_contains the text that matched (null: no match). `note` says why a file counts as
 * missing (outside the allowed root, not a regular file) or was only partly searched.
 */
export const WorkspaceObservation = z.object({
  source: z.literal('workspace'),
  exists: z.boolean(),
  size: z.number().int().nonnegative().nullable(),
  sha256: z.string().nullable(),
  excerpt: z.string().nullable(),
  note: z.string().nullable(),
});
export type WorkspaceObservation = z.infer<typeof WorkspaceObservation>;

/**
 * Keyed hashes (HMAC-SHA256, with a key kept beside the database, never in the log) of a provided
 * secret in the forms a command prints it whole: as is, base64 (with and without the newline
 * `echo` adds) and hex. Each form names its length, so output is searched only for tokens that long.
 */
export const SecretFingerprint = z.object({
  alg: z.literal('hmac-sha256'),
  forms: z.array(
    z.object({
      encoding: z.enum(['plain', 'base64', 'base64_newline', 'hex']),
      length: z.number().int().positive(),
      digest: z.string(),
    }),
  ),
});
export type SecretFingerprint = z.infer<typeof SecretFingerprint>;

export const EventPayloads = {
  TASK_RECEIVED: z.object({
    input: z.string(),
    session_id: Id,
    accept_checks: z.array(AcceptCheck).default([]),
    budgets: Budgets.default({}),
    idempotency_key: z.string().nullable().default(null),
    request_hash: z.string().nullable().default(null),
    source: z.enum(['api', 'cli', 'fork', 'replay', 'delegation', 'schedule', 'hook']).default('api'),
    /** fork: the task and sequence this task's history was copied from */
    forked_from: z.object({ task_id: Id, sequence: z.number().int().positive() }).nullable().default(null),
    /** what shaped the run (absent in logs written before it was recorded: those replay under current settings) */
    settings: RunSettings.optional(),
    /** the session's earlier ended tasks when this one was received, oldest first (absent: none) */
    session_history: z.array(SessionTurn).optional(),
    /** the session's budget across its tasks and what it had spent when this one was received (absent: none) */
    session_budget: SessionBudget.optional(),
    /** fork: the orchestrator model it runs with instead of the configured one (absent: the configured one) */
    model: z.string().min(1).max(200).optional(),
    /** delegation: the task that started this one (absent for a task submitted by a person) */
    parent_task_id: Id.optional(),
    /** delegation: the task at the top of the tree (absent for a task submitted by a person: it is its own root) */
    root_task_id: Id.optional(),
    /** delegation: how many delegations down from the root (absent: 0) */
    depth: z.number().int().positive().optional(),
    /** delegation: the agent profile the task runs as, as it was when the task started */
    agent: AgentProfile.optional(),
    /** AG-UI: the thread, run, context, forwarded props and frontend tools the run was started with */
    ag_ui: AgUiRun.optional(),
    /** round policy: whether the task may change things, and why (absent: round policy off) */
    mutation_intent: MutationIntent.optional(),
    /**
     * double-texting: the session's unfinished task this one runs after (absent: it runs at once), and
     * the strategy that applied. Its session history is then recorded by SESSION_TURN_BEGAN.
     */
    queued_behind: Id.optional(),
    on_busy: OnBusy.optional(),
  }),
  /**
   * The task it was queued behind ended: this task's turn in its session begins, with the session's
   * history as it stands now (the ended task included unless it was rolled back).
   */
  SESSION_TURN_BEGAN: z.object({
    after_task_id: Id,
    session_history: z.array(SessionTurn),
    /** the session's budget taken again, with what the tasks it waited for spent (absent: none) */
    session_budget: SessionBudget.optional(),
  }),
  /**
   * A newer message of the session (`by_task_id`, strategy interrupt) asks the task to stop: it ends
   * with stop reason `interrupted` at its next safe point (before its next round; at once when it waits).
   */
  INTERRUPT_REQUESTED: z.object({ by_task_id: Id }),
  /** A schedule was created (stream `system:schedules`, as every schedule event): its spec as given. */
  SCHEDULE_CREATED: z.object({ schedule_id: Id, spec: ScheduleSpec }),
  SCHEDULE_PAUSED: z.object({ schedule_id: Id }),
  SCHEDULE_RESUMED: z.object({ schedule_id: Id }),
  SCHEDULE_DELETED: z.object({ schedule_id: Id }),
  /**
   * A slot of a schedule came due and was decided, once per slot: `started` submitted the task whose
   * idempotency key is `schedule:<id>:<slot>` (task_id); `skipped` (the previous task still ran,
   * overlap skip, or a buffered slot already waits); `buffered` (overlap buffer_one: it starts when the
   * previous task ends, with a later `started` of the same slot); `missed` (slots that passed while no
   * instance ran, catch_up skip: `missed` counts them, the slot is the latest). `missed` on a `started`
   * slot: run_once stood in for that many.
   */
  SCHEDULE_FIRED: z.object({
    schedule_id: Id,
    slot: z.string().datetime({ offset: true }),
    outcome: z.enum(['started', 'skipped', 'buffered', 'missed']),
    task_id: Id.nullable(),
    missed: z.number().int().nonnegative().default(0),
  }),
  /**
   * An inbound webhook delivery was verified and acted on (stream `hook:<name>:<delivery key>`, one per
   * delivery, written once: a second delivery with the same id finds it and is answered from it).
   * `action`: `task` (it submitted task_id under the idempotency key `hook:<name>:<delivery_id>`),
   * `signal` (it sent signal_id, named signal_name, to task_id) or `ignored` (its `when` did not match).
   */
  HOOK_RECEIVED: z.object({
    hook: Id,
    delivery_id: Id,
    action: z.enum(['task', 'signal', 'ignored']),
    task_id: Id.nullable(),
    signal_id: Id.nullable(),
    signal_name: Id.nullable(),
    /** hex SHA-256 of the raw body as received (the body itself is in the task's input or the signal's payload) */
    body_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  }),
  /** A session's own settings (stream `session:<session_id>`): its double-texting strategy. */
  SESSION_CONFIGURED: z.object({ on_busy: OnBusy }),
  /**
   * A task of the session was rolled back by a newer message (stream `session:<session_id>`): it is
   * cancelled and no later task of the session is shown it in its history.
   */
  TASK_ROLLED_BACK: z.object({ task_id: Id, by_task_id: Id }),
  CONTEXT_BUILT: z.object({
    round: z.number().int().nonnegative(),
    sections: z.record(
      z.string(),
      z.object({ tokens: z.number().int().nonnegative(), trimmed: z.number().int().nonnegative() }),
    ),
    total_tokens: z.number().int().nonnegative(),
    budget_tokens: z.number().int().nonnegative(),
    cut: z.array(z.string()).default([]),
    /** text: what the prompt showed, so a replay can show it again */
    memory_hits: z.array(z.object({ id: Id, score: z.number(), text: z.string().optional() })).default([]),
    compacted: z.boolean().default(false),
    /**
     * the session's spend when the round was built (earlier tasks' and this one's), and whether it
     * was near the session budget: then the session's earlier tasks gave way first (absent: no session budget)
     */
    session_budget: z
      .object({
        used_tokens: z.number().int().nonnegative(),
        used_cost_usd: z.number().nonnegative(),
        near: z.boolean(),
      })
      .optional(),
    /** round policy: what the round was offered, and why (absent: round policy off, every tool offered) */
    tool_surface: z
      .object({ surface: ToolSurface, reason: z.string(), tools: z.array(z.string()) })
      .optional(),
  }),
  ROUTER_DECIDED: z.object({
    round: z.number().int().nonnegative(),
    directive: ExecutionDirective,
    source: z.enum(['orchestrator', 'sys_util', 'replay']),
    fallback_reason: z.string().nullable().default(null),
    attempts: z.number().int().nonnegative().default(1),
    /** the native tool calls the directive was made of (tools protocol); sent back as the round's tool turn */
    tool_calls: z.array(ModelToolCall).optional(),
  }),
  MODEL_CALLED: z.object({
    call_id: Id,
    role: Role,
    model: z.string(),
    backend: z.string(),
    attempt: z.number().int().positive().default(1),
    round: z.number().int().nonnegative().nullable().default(null),
    prompt_chars: z.number().int().nonnegative(),
    /** the plan step a coder call works for, so the step's conversation can be rebuilt from the log */
    step_id: z.string().optional(),
    /** assistant tool-call turns the request carried, and how many were malformed (checked before sending: stays 0) */
    tool_turns: z
      .object({ count: z.number().int().nonnegative(), malformed: z.number().int().nonnegative() })
      .optional(),
  }),
  MODEL_RESPONDED: z.object({
    call_id: Id,
    role: Role,
    model: z.string(),
    content: z.string().nullable(),
    usage: TokenUsage,
    latency_ms: z.number().nonnegative(),
    error: ErrorInfo.nullable().default(null),
    finish_reason: z.string().nullable().default(null),
    retry_after_ms: z.number().nonnegative().nullable().default(null),
    /** native tool calls of the reply, exactly as sent (tools protocol; absent when the request offered no tools) */
    tool_calls: z.array(ModelToolCall).optional(),
    /** priced when recorded (config price table), so a later price change never rewrites history */
    cost_usd: z.number().nonnegative().optional(),
    /** the model's reasoning, when its server returned it apart from the content (absent: none returned) */
    reasoning: z.string().optional(),
    /** Responses API: the stored conversation this call continued, or why it sent the whole one */
    continuation: ModelContinuation.optional(),
  }),
  PLAN_STARTED: z.object({ plan_id: Id, steps: z.array(PlanStep).min(1) }),
  PLAN_COMPLETED: z.object({ plan_id: Id, step_results: z.array(StepResultSummary) }),
  PLAN_FAILED: z.object({
    plan_id: Id.nullable(),
    reason: z.string(),
    failed_step: Id.nullable().default(null),
    cycle: z.array(Id).nullable().default(null),
    step_results: z.array(StepResultSummary).default([]),
  }),
  STEP_STARTED: z.object({
    plan_id: Id,
    step_id: Id,
    kind: PlanStep.shape.kind,
    attempt: z.number().int().positive().default(1),
  }),
  STEP_COMPLETED: z.object({ plan_id: Id, step_id: Id, output: Json }),
  STEP_FAILED: z.object({ plan_id: Id, step_id: Id, error: z.string(), skipped: z.boolean().default(false) }),
  TOOL_CALLED: z.object({
    call_id: Id,
    tool: z.string().min(1),
    args: z.record(z.string(), Json),
    args_hash: z.string(),
    step_id: Id.nullable().default(null),
    idempotent: z.boolean().default(false),
    attempt: z.number().int().positive().default(1),
  }),
  TOOL_COMPLETED: z.object({
    call_id: Id,
    tool: z.string(),
    result: ToolResult,
    duration_ms: z.number().nonnegative(),
    /** the client-tool request this outcome answers: the client ran the tool and sent its result */
    request_id: Id.optional(),
  }),
  TOOL_FAILED: z.object({
    call_id: Id,
    tool: z.string(),
    result: ToolResult.nullable().default(null),
    error: z.string(),
    error_kind: z.enum([
      'tool_error',
      'timeout',
      'permission_denied',
      'validation_error',
      'outcome_unknown',
      'hard_stop',
    ]),
    duration_ms: z.number().nonnegative().default(0),
    /** the client-tool request this outcome answers: the client sent an error, or would not run it */
    request_id: Id.optional(),
  }),
  /**
   * A call to a tool the client offered (AG-UI frontend tools, TASK_RECEIVED.ag_ui.tools): it runs
   * there, not here, so the task waits for its result, which is recorded as the call's TOOL_COMPLETED
   * or TOOL_FAILED naming this request.
   */
  TASK_AWAITING_CLIENT_TOOL: z.object({
    request_id: Id,
    call_id: Id,
    tool: z.string(),
    args: z.record(z.string(), Json),
    reason: z.string(),
  }),
  TASK_AWAITING_PERMISSION: z.object({
    request_id: Id,
    call_id: Id,
    tool: z.string(),
    args: z.record(z.string(), Json),
    args_hash: z.string(),
    rule: z.string().nullable().default(null),
    reason: z.string(),
    /** what an allow_always answer would cover (tool, rule, scope); absent in logs written before it */
    covers: z.string().optional(),
  }),
  PERMISSION_RESOLVED: z.object({
    request_id: Id,
    call_id: Id,
    decision: PermissionDecision,
    args_hash: z.string(),
    tool: z.string(),
    /** allow_always only: what the answer covers from now on, as the person was told */
    covers: z.string().optional(),
    /** an MCP server's form (rule mcp_elicitation) answered allow_once: what the person filled in, returned to the server */
    content: z.record(z.string(), Json).optional(),
  }),
  TASK_AWAITING_SECRET: z.object({
    request_id: Id,
    call_id: Id,
    tool: z.string(),
    secret_name: z.string(),
    reason: z.string(),
  }),
  /** never carries the value; the fingerprint lets a later process recognise it in output to redact */
  SECRET_PROVIDED: z
    .object({
      request_id: Id,
      call_id: Id,
      secret_name: z.string(),
      fingerprint: SecretFingerprint.optional(),
    })
    .strict(),
  CRITIC_RESULT: z.object({
    target_event_id: Id.nullable(),
    call_id: Id.nullable().default(null),
    critic: z.enum(['model', 'heuristic']),
    score: CriticScore.nullable(),
    error: z.string().nullable().default(null),
  }),
  MEMORY_WRITTEN: z
    .object({
      op: z.enum(['insert', 'reinforce', 'delete']),
      entry_id: Id,
      kind: MemoryKind,
      /**
       * An insert's text. A reinforce or a delete names its entry by id and copies no entry's text
       * (an erasure must not leave a copy in another session's events, or in clear on the system
       * stream); a reinforce of a write not committed yet carries the writer's own text, which
       * stores the entry should that write never commit. A reinforce or delete of an older log may
       * hold its entry's text.
       */
      text: z.string().optional(),
      weight: z.number().min(0).max(1),
      previous_weight: z.number().min(0).max(1).nullable().default(null),
      source: z.enum(['tool', 'critic', 'user', 'system']),
      source_event_id: Id.nullable(),
      reason: z.string(),
      embedding_model: z.string(),
      embedding_dim: z.number().int().positive(),
      metadata: z.record(z.string(), Json).default({}),
    })
    .refine((p) => p.op !== 'insert' || p.text !== undefined, {
      message: 'an insert carries its text',
      path: ['text'],
    }),
  CHECKPOINT_SAVED: z.object({
    checkpoint_id: Id,
    label: z.string(),
    at_sequence: z.number().int().positive(),
  }),
  ACCEPTANCE_DECIDED: z.object({
    passed: z.boolean(),
    results: z.array(
      z.object({
        id: Id,
        kind: AcceptCheck.shape.kind,
        required: z.boolean(),
        passed: z.boolean(),
        detail: z.string(),
        /** what the gate saw in the workspace when the log did not settle the check; a replay reuses it */
        observed: WorkspaceObservation.optional(),
      }),
    ),
  }),
  OUTPUT_CHUNK: z.object({ call_id: Id, index: z.number().int().nonnegative(), delta: z.string() }),
  /** a piece of the model's reasoning as its server streamed it (MODEL_RESPONDED.reasoning holds the whole) */
  REASONING_CHUNK: z.object({ call_id: Id, index: z.number().int().nonnegative(), delta: z.string() }),
  /** a delegation started a child task (intent: recorded before the child's stream is created) */
  CHILD_TASK_STARTED: z.object({
    call_id: Id,
    /** the plan step that delegated; null for a delegate directive */
    step_id: Id.nullable(),
    child_task_id: Id,
    agent: AgentName,
    input: z.string(),
    /** carved from this task's remaining budget */
    budgets: Budgets,
    accept_checks: z.array(AcceptCheck).default([]),
    depth: z.number().int().positive(),
    /**
     * A remote agent's delegation: recorded before the message is sent, so a resumed parent finds the
     * remote task by this message and context instead of sending it again. No local child task exists.
     */
    remote: z
      .object({
        /** the agent's card URL or base URL, as configured when it started */
        url: z.string(),
        message_id: Id,
        context_id: Id,
      })
      .optional(),
  }),
  /**
   * What a remote agent's task became, as the parent uses it: its state, its status message (and what
   * it asks, when it waits for input), its artifacts' text and reported usage. A replay reads these
   * instead of the network.
   */
  REMOTE_TASK_UPDATED: z.object({
    call_id: Id,
    remote_task_id: Id,
    context_id: z.string(),
    state: RemoteTaskState,
    message: z.string().nullable(),
    /** an input-required / auth-required task's question: its data part, and what identifies it */
    request: z.object({ ask_id: z.string().min(1), data: z.record(z.string(), Json).nullable() }).nullable(),
    artifacts: z.array(z.object({ artifact_id: z.string(), name: z.string(), text: z.string() })),
    /** the remote's own stop reason and usage, when it reports them (a Runledger does) */
    stop_reason: z.string().nullable(),
    usage: TaskUsage.nullable(),
  }),
  /** the child task of a delegation ended: its stop reason, result and usage (added to this task's) */
  CHILD_TASK_ENDED: z.object({
    call_id: Id,
    step_id: Id.nullable(),
    child_task_id: Id,
    status: z.enum(['completed', 'failed', 'cancelled']),
    stop_reason: StopReason,
    detail: z.string(),
    result: z.string().nullable(),
    usage: TaskUsage,
  }),
  /**
   * A durable timer: the task waits, holding no lease and no run slot, until `due_at` (computed once,
   * here). `counts_against_timeout`: the wait is part of the task's time budget (its settings say so).
   */
  TIMER_SET: z.object({
    timer_id: Id,
    /** the plan step that waits (`wait` for a wait directive) */
    step_id: Id,
    due_at: z.string().datetime({ offset: true }),
    /** as asked: a duration from when the timer was set, or a point in time */
    duration_ms: z.number().int().nonnegative().nullable(),
    until: z.string().nullable(),
    counts_against_timeout: z.boolean(),
  }),
  /** the timer came due and was fired by whichever instance held the task then: once per TIMER_SET */
  TIMER_FIRED: z.object({ timer_id: Id, due_at: z.string() }),
  /**
   * A signal sent to the task (`POST /tasks/:id/signals/:name`, an inbound webhook): recorded once per
   * signal_id, kept until a wait for its name takes it, in the order received.
   */
  SIGNAL_RECEIVED: z.object({ signal_id: Id, name: Id, payload: Json }),
  /**
   * The task waits for a signal of this name (a wait_for_signal step): with a timeout, a TIMER_SET of
   * the same id rides in the same commit, and its firing ends the wait as timed out.
   */
  SIGNAL_AWAITED: z.object({
    wait_id: Id,
    step_id: Id,
    name: Id,
    timeout_ms: z.number().int().positive().nullable(),
    counts_against_timeout: z.boolean(),
  }),
  /**
   * The wait ends with this signal, the oldest of its name not yet taken. A delivery to a wait that
   * already ended, or of a signal already taken, changes nothing.
   */
  SIGNAL_DELIVERED: z.object({ wait_id: Id, signal_id: Id, name: Id }),
  /** a guard acted without ending the task: a reminder, a retry, a fallback, a compaction, a circuit breaker */
  GUARD_TRIGGERED: z.object({
    guard: z.enum([
      'completion_reminder',
      'repeat_reminder',
      'retry',
      'fallback',
      'compaction',
      'circuit_breaker',
      'correction',
      'resumed',
      'todo_reminder',
      'answer_retry',
    ]),
    round: z.number().int().nonnegative().nullable().default(null),
    detail: z.string(),
    data: z.record(z.string(), Json).default({}),
  }),
  /**
   * Outbound deliveries (stream `outbound:<task_id>`, never a task's own stream): a callback URL is
   * told of the task's updates after `from_seq`, in `format` (`a2a`: A2A StreamResponse JSON;
   * `runledger`: the task's status). `token` is the receiver's own check value (A2A's notification
   * token), not a credential of ours.
   */
  CALLBACK_REGISTERED: z.object({
    callback_id: Id,
    task_id: Id,
    url: z.url({ protocol: /^https?$/ }),
    token: z.string().max(1000).nullable(),
    format: z.enum(['a2a', 'runledger']),
    from_seq: z.number().int().nonnegative(),
  }),
  CALLBACK_REMOVED: z.object({ callback_id: Id, task_id: Id }),
  /** one attempt claimed (the claim lasts until claimed_until): recorded before the request is sent */
  DELIVERY_STARTED: z.object({
    delivery_id: Id,
    callback_id: Id,
    seq: z.number().int().positive(),
    attempt: z.number().int().positive(),
    claimed_until: z.string(),
  }),
  DELIVERY_SUCCEEDED: z.object({
    delivery_id: Id,
    callback_id: Id,
    seq: z.number().int().positive(),
    attempt: z.number().int().positive(),
    status_code: z.number().int(),
    duration_ms: z.number().nonnegative(),
  }),
  /** retry_at null: no attempt is left and the update is given up */
  DELIVERY_FAILED: z.object({
    delivery_id: Id,
    callback_id: Id,
    seq: z.number().int().positive(),
    attempt: z.number().int().positive(),
    status_code: z.number().int().nullable(),
    error: z.string().max(2000),
    retry_at: z.string().nullable(),
  }),
  /** a todo joined the task's list: declared by a plan (owner plan) or added by a todo tool call (owner round) */
  TODO_ADDED: z.object({
    todo_id: z.string().min(1).max(64),
    text: z.string(),
    required: z.boolean(),
    owner: TodoOwner,
    /** the tool call that added it (null: the plan's declaration) */
    call_id: Id.nullable().default(null),
  }),
  /** a todo moved along (a cancelled one always carries its note) */
  TODO_UPDATED: z.object({
    todo_id: z.string().min(1).max(64),
    status: TodoStatus,
    note: z.string().nullable().default(null),
    call_id: Id.nullable().default(null),
  }),
  /**
   * The answer evaluator's verdict on a final answer (attempt 1, or 2 for the one retry), before the
   * task ends. `retry`: the score was below the threshold and the model answers once more (a
   * GUARD_TRIGGERED answer_retry follows with the feedback it is shown). A failed or skipped
   * evaluation has no score and never stops the task.
   */
  ANSWER_EVALUATED: z.object({
    round: z.number().int().nonnegative(),
    attempt: z.number().int().positive(),
    /** the evaluator's model call (its MODEL_CALLED / MODEL_RESPONDED); null: none was made */
    call_id: Id.nullable(),
    score: z.number().min(0).max(1).nullable(),
    feedback: z.string(),
    threshold: z.number().min(0).max(1),
    passed: z.boolean().nullable(),
    error: z.string().nullable(),
    retry: z.boolean(),
    /** tokens the evaluator's call used (counted against its own max_tokens) */
    tokens: z.number().int().nonnegative(),
  }),
  /**
   * Finished task trees moved out of the live log into a checksummed archive segment (stream
   * `system:archive`), recorded in the transaction that moved them
   */
  TASKS_ARCHIVED: z.object({
    segment_id: Id,
    task_ids: z.array(Id),
    /** streams moved besides the tasks' own (their outbound deliveries) */
    companion_streams: z.array(z.string()).default([]),
    events: z.number().int().nonnegative(),
    bytes: z.number().int().nonnegative(),
    sha256: z.string(),
    /** policy: the retention sweeper or `runledger archive`; older_than: an age given by hand */
    reason: z.enum(['policy', 'older_than']),
  }),
  /**
   * Archived tasks moved on into the archive's catalog (stream `system:archive`): their summary rows
   * and archive records left the live database, recorded in the transaction that deleted them
   * there. Which tasks: those of the segments named, as their TASKS_ARCHIVED listed them (less any
   * restored since); the ids are not listed again, so this record stays small.
   */
  TASKS_CATALOGUED: z.object({
    segment_ids: z.array(Id).min(1),
    /** tasks (with companion streams) whose records moved */
    tasks: z.number().int().positive(),
    /** the cut: tasks archived at or before it moved */
    archived_before: z.string(),
  }),
  /** archived tasks brought back into the live log (stream `system:archive`) */
  TASKS_RESTORED: z.object({
    segment_id: Id,
    task_ids: z.array(Id),
    events: z.number().int().nonnegative(),
  }),
  /**
   * A session's content erased (stream `system:erasure`): its data key destroyed, so the personal
   * fields of its events read as erased wherever they are stored. Ids only, no content.
   */
  SESSION_ERASED: z.object({
    session_id: Id,
    task_ids: z.array(Id),
    erased_at: z.string(),
  }),
  /**
   * A task tree's content erased (stream `system:erasure`): the data keys of its streams (the root,
   * its delegated children, their companion streams) destroyed, so the personal fields of their
   * events read as erased wherever they are stored; the session's other trees keep theirs. Ids only.
   */
  TASK_TREE_ERASED: z.object({
    session_id: Id,
    root_task_id: Id,
    task_ids: z.array(Id),
    erased_at: z.string(),
  }),
  /**
   * A session's own budget across its tasks (stream `session:<session_id>`, never a task's): it comes
   * before the limits a task of the session named; a task received after it records it in its
   * TASK_RECEIVED.session_budget (source `setting`). Null: no limit of that kind.
   */
  SESSION_BUDGET_SET: z.object({
    max_tokens: z.number().int().positive().nullable(),
    max_cost_usd: z.number().nonnegative().nullable(),
  }),
  TASK_COMPLETED: z.object({
    ...FinalPayload,
    stop_reason: z.literal('completed'),
    result: z.string(),
    /** round policy: who wrote the visible answer, the model or the runtime from recorded facts (absent: policy off) */
    answer_source: z.enum(['model', 'runtime']).optional(),
  }),
  TASK_FAILED: z.object({
    ...FinalPayload,
    result: z.string().nullable().default(null),
    answer_source: z.enum(['model', 'runtime']).optional(),
  }),
  /** cancelled by request, or interrupted by a newer message of its session (double-texting) */
  TASK_CANCELLED: z.object({ ...FinalPayload, stop_reason: z.enum(['cancelled', 'interrupted']) }),
} as const;

export type EventType = keyof typeof EventPayloads;
export const EVENT_TYPES = Object.keys(EventPayloads) as EventType[];
export const EventTypeSchema = z.enum(EVENT_TYPES as [EventType, ...EventType[]]);
export type EventPayload<T extends EventType> = z.infer<(typeof EventPayloads)[T]>;
export const FINAL_EVENT_TYPES: readonly EventType[] = ['TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED'];
export const isFinalEventType = (t: string): boolean => (FINAL_EVENT_TYPES as readonly string[]).includes(t);

/** { type, payload } pairs as a discriminated union, one member per event type. */
const typedMembers = EVENT_TYPES.map((type) =>
  z.object({ type: z.literal(type), payload: EventPayloads[type] }),
) as unknown as [
  z.ZodObject<{ type: z.ZodLiteral<EventType>; payload: z.ZodTypeAny }>,
  ...z.ZodObject<{ type: z.ZodLiteral<EventType>; payload: z.ZodTypeAny }>[],
];
export const TypedEventBody = z.discriminatedUnion('type', typedMembers);

export type TypedEvent = { [T in EventType]: { type: T; payload: EventPayload<T> } }[EventType];

/** What a writer hands to EventStore.append. Ids and times are filled in when absent. */
export type NewEvent = TypedEvent & {
  event_id?: string;
  causation_id?: string | null;
  correlation_id?: string;
  session_id?: string;
  created_at?: string;
};

/** The stored envelope (wire and storage use these snake_case names). */
export type RuntimeEvent<T extends EventType = EventType> = {
  [K in T]: {
    event_id: string;
    task_id: string;
    session_id: string;
    sequence: number;
    position: number;
    type: K;
    payload: EventPayload<K>;
    causation_id: string | null;
    correlation_id: string;
    created_at: string;
    /** the version of the payload's shape (see event-versions.ts); served upcast to today's */
    schema_version: number;
  };
}[T];

/**
 * A tool outcome (TOOL_COMPLETED / TOOL_FAILED) as the outcome hooks (critic,
 * memory) see it: before it is stored, so that their events commit with it in
 * one append. Its event_id is final; sequence, position and time are assigned
 * by the store. A stored event is one too.
 */
export type PendingToolOutcome = {
  [K in 'TOOL_COMPLETED' | 'TOOL_FAILED']: {
    event_id: string;
    task_id: string;
    type: K;
    payload: EventPayload<K>;
  };
}['TOOL_COMPLETED' | 'TOOL_FAILED'];

export const RuntimeEventEnvelope = z.object({
  event_id: Id,
  task_id: Id,
  session_id: Id,
  sequence: z.number().int().positive(),
  position: z.number().int().positive(),
  type: EventTypeSchema,
  payload: z.unknown(),
  causation_id: Id.nullable(),
  correlation_id: Id,
  created_at: z.string(),
  /** the payload's shape (see event-versions.ts): events are served in today's, upcast on read */
  schema_version: z.number().int().positive(),
});

/**
 * The payloads parseEventBody returned, with the type each was parsed as:
 * parsing one of them again as that type (the task writer parses what it
 * folds, the store what it appends) returns it as it is, since a parse of a
 * parse's output changes nothing.
 */
const parsedPayloads = new WeakMap<object, string>();

/**
 * Validate an event body against the catalogue. Returns the parsed payload
 * (defaults applied) or throws ValidationError naming the type and the issue.
 */
export function parseEventBody(body: { type: string; payload: unknown }): TypedEvent {
  const { payload } = body;
  if (typeof payload === 'object' && payload !== null && parsedPayloads.get(payload) === body.type)
    return { type: body.type, payload } as TypedEvent;
  const schema = (EventPayloads as Record<string, z.ZodTypeAny>)[body.type];
  if (!schema) {
    throw new EventValidationError(`unknown event type ${JSON.stringify(body.type)}`, { type: body.type });
  }
  const parsed = schema.safeParse(body.payload);
  if (!parsed.success) {
    throw new EventValidationError(
      `invalid ${body.type} payload: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      {
        type: body.type,
        issues: parsed.error.issues,
      },
    );
  }
  if (typeof parsed.data === 'object' && parsed.data !== null) parsedPayloads.set(parsed.data, body.type);
  return { type: body.type, payload: parsed.data } as TypedEvent;
}

export class EventValidationError extends ValidationError {}

/** Narrow a stored event to one type. */
export function isEventOfType<T extends EventType>(
  e: RuntimeEvent,
  type: T,
): e is Extract<RuntimeEvent, { type: T }> {
  return e.type === type;
}
