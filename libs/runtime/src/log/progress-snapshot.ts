import {
  ClientTool,
  ModelContinuation,
  PermissionDecision,
  StopReason,
  TaskStatus,
  TaskUsage,
  ModelToolCall,
  TodoOwner,
  TodoStatus,
} from '@runledger/contracts';
import { StepStatus } from '@runledger/scheduler';
import { z } from 'zod';
import { SeenSet } from '../discipline/seen-set';
import { initialTodoState } from '../discipline/todos';
import {
  CallProgress,
  ChildProgress,
  PendingClientTool,
  PlanProgress,
  SignalProgress,
  SignalWaitProgress,
  TaskProgress,
  TimerProgress,
} from './progress';

/** Version of the snapshot's shape; a snapshot of another version is ignored and the log folded instead. */
export const PROGRESS_SNAPSHOT_VERSION = 2;

// Payload-derived parts (directives, steps, results, pending requests) were validated when their
// events were appended; here they are checked for shape only, loose and without defaults, so a
// parsed snapshot is exactly the progress that was saved.
const Loose = z.looseObject({});
const Args = z.record(z.string(), z.unknown());

const CallSnapshot = z.object({
  call_id: z.string(),
  tool: z.string(),
  args: Args,
  args_hash: z.string(),
  step_id: z.string().nullable(),
  attempt: z.number().int(),
  outcome: z.enum(['completed', 'failed']).nullable(),
  result: Loose.nullable(),
  error: z.string().nullable(),
  error_kind: z.string().nullable(),
  awaiting_input: z.literal(true).optional(),
});

const PlanSnapshot = z.object({
  plan_id: z.string(),
  round: z.number().int(),
  steps: z.array(z.looseObject({ id: z.string() })),
  status: z.array(z.tuple([z.string(), z.string()])),
  outputs: z.array(z.tuple([z.string(), z.unknown()])),
  errors: z.array(z.tuple([z.string(), z.string()])),
  outcome: z.enum(['completed', 'failed']).nullable(),
});

const HistorySnapshot = z.object({
  round: z.number().int(),
  directive: z.unknown(),
  results: z.array(z.string()),
  sources: z.record(z.string(), z.string()).optional(),
  ok: z.boolean(),
  tool_calls: z.array(ModelToolCall).optional(),
});

const MeterSnapshot = z.object({
  usage: TaskUsage,
  pendingCalls: z.record(z.string(), z.object({ prompt_chars: z.number() })),
  rounds: z.array(z.number()),
  startedAt: z.string().nullable(),
  waitedMs: z.number(),
  waitingSince: z.string().nullable(),
});

const TodoSnapshot = z.object({
  items: z.array(
    z.tuple([
      z.string(),
      z.object({
        id: z.string(),
        text: z.string(),
        required: z.boolean(),
        status: TodoStatus,
        note: z.string().nullable(),
        owner: TodoOwner,
        added: z.number().int(),
      }),
    ]),
  ),
  plan: z.object({ plan_id: z.string(), since: z.number().int() }).nullable(),
  reminded: z.boolean(),
});

const ProgressSnapshotSchema = z.looseObject({
  $schema_version: z.literal(PROGRESS_SNAPSHOT_VERSION),
  task_id: z.string(),
  session_id: z.string(),
  input: z.string(),
  budgets: z.record(z.string(), z.unknown()),
  /** absent in snapshots taken before session budgets: those tasks had none */
  session_budget: Loose.nullable().optional(),
  accept_checks: z.array(Loose),
  status: TaskStatus,
  round: z.number().int(),
  directive: z.looseObject({ type: z.string() }).nullable(),
  roundClosed: z.boolean(),
  calls: z.array(CallSnapshot),
  plans: z.array(PlanSnapshot),
  pendingPermission: Loose.nullable(),
  pendingSecret: Loose.nullable(),
  /** absent in snapshots taken before client tools existed: those tasks had none */
  clientTools: z.array(z.tuple([z.string(), Loose])).optional(),
  pendingClientTools: z.array(z.tuple([z.string(), Loose])).optional(),
  /** absent in snapshots taken before timers existed: those tasks had none */
  timers: z.array(z.tuple([z.string(), z.object({ set: Loose, fired: z.boolean() })])).optional(),
  /** absent in snapshots taken before signals existed: those tasks had none */
  signals: z
    .array(z.tuple([z.string(), z.object({ received: Loose, taken_by: z.string().nullable() })]))
    .optional(),
  signalWaits: z
    .array(z.tuple([z.string(), z.object({ awaited: Loose, outcome: Loose.nullable() })]))
    .optional(),
  permissionDecisions: z.array(
    z.tuple([
      z.string(),
      z.object({ decision: PermissionDecision, args_hash: z.string(), content: Args.optional() }),
    ]),
  ),
  modelCalls: z.record(z.string(), z.number()),
  modelCallBackends: z.array(z.tuple([z.string(), z.string()])),
  /** absent in snapshots taken before the Responses API: those tasks continued no stored conversation */
  modelCallConversations: z.array(z.tuple([z.string(), z.string()])).optional(),
  continuations: z
    .array(
      z.tuple([
        z.string(),
        ModelContinuation.pick({ response_id: true, items_hash: true, item_count: true }),
      ]),
    )
    .optional(),
  history: z.array(HistorySnapshot),
  pendingNotes: z.array(z.string()),
  parent_task_id: z.string().nullable(),
  root_task_id: z.string(),
  depth: z.number().int().nonnegative(),
  agent: Loose.nullable(),
  settings: Loose.nullable(),
  /** `remote` absent in snapshots taken before remote agents: those children were local */
  children: z.array(
    z.tuple([
      z.string(),
      z.object({ started: Loose, ended: Loose.nullable(), remote: Loose.nullable().default(null) }),
    ]),
  ),
  meter: MeterSnapshot,
  /** absent in snapshots taken before tasks had todos: those tasks had none */
  todos: TodoSnapshot.optional(),
  /** absent in snapshots taken before answers were evaluated: those tasks had no verdict */
  evaluation: z
    .object({
      attempts: z.number().int().nonnegative(),
      retried: z.boolean(),
      tokens: z.number().int().nonnegative(),
      round: z.number().int().nullable(),
    })
    .optional(),
  final: z.object({ stop_reason: StopReason, detail: z.string(), result: z.string().nullable() }).nullable(),
  /** absent in snapshots taken before double-texting: those tasks queued behind none and were never interrupted */
  queuedBehind: z.string().nullable().optional(),
  interruptedBy: z.string().nullable().optional(),
  last_seq: z.number().int().nonnegative(),
});

export type ProgressSnapshot = z.infer<typeof ProgressSnapshotSchema>;

/** The progress as plain JSON (maps as entry lists), under its schema version: a checkpoint's context. */
export function progressSnapshot(p: TaskProgress): ProgressSnapshot {
  const { usage: _sameAsMeterUsage, ...rest } = p;
  return structuredClone({
    $schema_version: PROGRESS_SNAPSHOT_VERSION,
    ...rest,
    calls: [...p.calls.values()],
    plans: [...p.plans.values()].map((plan) => ({
      ...plan,
      status: [...plan.status],
      outputs: [...plan.outputs],
      errors: [...plan.errors],
    })),
    permissionDecisions: [...p.permissionDecisions],
    timers: [...p.timers],
    clientTools: [...p.clientTools],
    pendingClientTools: [...p.pendingClientTools],
    signals: [...p.signals],
    signalWaits: [...p.signalWaits],
    modelCallBackends: [...p.modelCallBackends],
    modelCallConversations: [...p.modelCallConversations],
    continuations: [...p.continuations],
    children: [...p.children],
    meter: { ...p.meter, rounds: p.meter.rounds.values() },
    todos: { ...p.todos, items: [...p.todos.items] },
  }) as ProgressSnapshot;
}

/** The progress a snapshot holds; null when it is not a snapshot of this version (fold the log instead). */
export function progressFromSnapshot(json: unknown): TaskProgress | null {
  const parsed = ProgressSnapshotSchema.safeParse(json);
  if (!parsed.success) return null;
  const { $schema_version: _version, ...s } = structuredClone(parsed.data);
  return {
    ...(s as unknown as Omit<
      TaskProgress,
      | 'calls'
      | 'plans'
      | 'permissionDecisions'
      | 'modelCallBackends'
      | 'modelCallConversations'
      | 'continuations'
      | 'meter'
      | 'children'
      | 'todos'
      | 'timers'
      | 'clientTools'
      | 'pendingClientTools'
      | 'signals'
      | 'signalWaits'
    >),
    clientTools: new Map((s.clientTools ?? []) as Array<[string, ClientTool]>),
    pendingClientTools: new Map((s.pendingClientTools ?? []) as Array<[string, PendingClientTool]>),
    todos: s.todos ? { ...s.todos, items: new Map(s.todos.items) } : initialTodoState(),
    evaluation: s.evaluation ?? { attempts: 0, retried: false, tokens: 0, round: null },
    session_budget: (s.session_budget ?? null) as TaskProgress['session_budget'],
    queuedBehind: s.queuedBehind ?? null,
    interruptedBy: s.interruptedBy ?? null,
    timers: new Map((s.timers ?? []) as Array<[string, TimerProgress]>),
    signals: new Map((s.signals ?? []) as Array<[string, SignalProgress]>),
    signalWaits: new Map((s.signalWaits ?? []) as Array<[string, SignalWaitProgress]>),
    children: new Map(s.children as Array<[string, ChildProgress]>),
    calls: new Map(s.calls.map((c) => [c.call_id, c as CallProgress])),
    plans: new Map(
      s.plans.map((plan) => [
        plan.plan_id,
        {
          ...plan,
          status: new Map(plan.status as Array<[string, StepStatus]>),
          outputs: new Map(plan.outputs),
          errors: new Map(plan.errors),
        } as PlanProgress,
      ]),
    ),
    permissionDecisions: new Map(s.permissionDecisions),
    modelCallBackends: new Map(s.modelCallBackends),
    modelCallConversations: new Map(s.modelCallConversations ?? []),
    continuations: new Map(s.continuations ?? []),
    meter: { ...s.meter, rounds: SeenSet.of(s.meter.rounds) },
    // the fold keeps usage as the meter's own numbers
    usage: s.meter.usage,
  };
}
