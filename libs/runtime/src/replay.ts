import { randomBytes } from 'node:crypto';
import { NestFactory } from '@nestjs/core';
import {
  IllegalStateError,
  NewEvent,
  NotFoundError,
  PermissionCheck,
  Role,
  RunSettings,
  RuntimeEvent,
  ToolManifest,
  ToolResult,
} from '@runledger/contracts';
import {
  Critic,
  CriticModel,
  HeuristicCritic,
  ModelCritic,
  criticEvents,
  criticInputOf,
} from '@runledger/critic';
import { PermissionService, PermissionSubject } from '@runledger/permissions';
import { ArgsValidation, RegisteredTool, ToolInputRequired, ToolRegistry } from '@runledger/tools';
import { ModelScript, ScriptItem, ScriptedBackend } from './model/scripted-backend';
import { LabelledBackend, recordedProviderLabels } from './model/providers';
import { RetrySettings } from './discipline/settings';
import { RecordedWorkspaceView } from './discipline/workspace-view';
import { RecordedClock, RecordedClockEventStore, reproducedInReplay } from './replay-clock';
import { runShapingOf } from './run-settings';
import { RuntimeController } from './runtime-controller';
import { RuntimeModule, RuntimeParts } from './runtime.module';
import { RecordedChildTasks } from './delegation/child-tasks';
import { TaskProgress, elicitedCall } from './progress';
import { rawChunksFor } from './respond-stream';
import { INPUT_REFUSED, MemoryHit, MemoryRecall, ToolOutcomeHook } from './ports';

/** The model answers a task recorded (MODEL_RESPONDED, with its streamed chunks), served again in order per role. */
export class ReplayBackend extends ScriptedBackend {
  override readonly backend = 'replay';
  /** the protocol the recording's orchestrator spoke, when its TASK_RECEIVED says (older runs: inferred from the answers) */
  private recordedProtocol: RunSettings['model_protocol'];

  override speaksToolCalls(role: Role): boolean {
    if (role === 'orchestrator' && this.recordedProtocol) return this.recordedProtocol === 'tools';
    return super.speaksToolCalls(role);
  }

  static fromEvents(events: readonly RuntimeEvent[]): ReplayBackend {
    const chunks = new Map<string, string[]>();
    for (const e of events)
      if (e.type === 'OUTPUT_CHUNK')
        chunks.set(e.payload.call_id, [...(chunks.get(e.payload.call_id) ?? []), e.payload.delta]);
    const script: ModelScript = {};
    for (const e of events) {
      if (e.type !== 'MODEL_RESPONDED') continue;
      const p = e.payload;
      const item: ScriptItem = p.error
        ? {
            error: p.error.kind as Extract<ScriptItem, { error: unknown }>['error'],
            message: p.error.message,
            ...(p.retry_after_ms !== null ? { retry_after_ms: p.retry_after_ms } : {}),
          }
        : {
            content: p.content ?? '',
            usage: {
              prompt_tokens: p.usage.prompt_tokens,
              completion_tokens: p.usage.completion_tokens,
              estimated: p.usage.estimated,
            },
            model: p.model,
            finish_reason: p.finish_reason,
            // Tools protocol (tool_calls recorded, even none): the text was streamed as it is, not out of a JSON directive.
            chunks: p.tool_calls
              ? (chunks.get(p.call_id) ?? [])
              : rawChunksFor(p.content ?? '', chunks.get(p.call_id) ?? []),
            ...(p.tool_calls ? { tool_calls: p.tool_calls } : {}),
          };
      (script[p.role] ??= []).push(item);
    }
    const replay = new ReplayBackend(script);
    const [first] = events;
    if (first?.type === 'TASK_RECEIVED') replay.recordedProtocol = first.payload.settings?.model_protocol;
    return replay;
  }
}

type RecordedOutcome = { result: ToolResult | null; error: string };

/** The question an attempt of a call stopped for (its server asked the user), as the recording shows it. */
type RecordedStop = ToolInputRequired;

/** For each call, the attempts in order, each with the question it stopped for, if it did. */
function recordedStops(events: readonly RuntimeEvent[]): Map<string, Array<RecordedStop | null>> {
  const attempts = new Map<string, Array<RecordedStop | null>>();
  for (const e of events) {
    if (e.type === 'TOOL_CALLED')
      attempts.set(e.payload.call_id, [...(attempts.get(e.payload.call_id) ?? []), null]);
    if (e.type !== 'TASK_AWAITING_PERMISSION' && e.type !== 'TASK_AWAITING_SECRET') continue;
    const callId = elicitedCall(e.payload.call_id);
    const list = callId ? attempts.get(callId) : undefined;
    if (!list?.length) continue;
    const index = Number(/\d+$/.exec(e.payload.call_id)![0]);
    list[list.length - 1] =
      e.type === 'TASK_AWAITING_PERMISSION'
        ? new ToolInputRequired(
            index,
            {
              message: String(e.payload.args.message ?? ''),
              requested_schema: (e.payload.args.requested_schema ?? {}) as Record<string, unknown>,
            },
            null,
          )
        : new ToolInputRequired(
            index,
            { message: e.payload.reason, requested_schema: {} },
            e.payload.secret_name,
          );
  }
  return attempts;
}

/**
 * Tools that answer with the outcome the recorded task got for the same call, never running anything.
 * A call retried (an idempotent tool after a tool_error) gets its recorded outcomes attempt by attempt;
 * an attempt that stopped because its server asked the user stops again at the same question (the
 * replay then answers it from the log, see replayTask).
 */
export class ReplayToolRegistry extends ToolRegistry {
  private readonly outcomes = new Map<string, RecordedOutcome[]>();
  private readonly stops: Map<string, Array<RecordedStop | null>>;
  private readonly runs = new Map<string, number>();

  constructor(
    private readonly live: ToolRegistry,
    events: readonly RuntimeEvent[],
  ) {
    super();
    const add = (callId: string, outcome: RecordedOutcome) =>
      this.outcomes.set(callId, [...(this.outcomes.get(callId) ?? []), outcome]);
    for (const e of events) {
      if (e.type === 'TOOL_COMPLETED') add(e.payload.call_id, { result: e.payload.result, error: '' });
      if (e.type === 'TOOL_FAILED' && e.payload.error_kind === 'tool_error')
        add(e.payload.call_id, { result: e.payload.result, error: e.payload.error });
    }
    this.stops = recordedStops(events);
  }

  list(): ToolManifest[] {
    return this.live.list().map((m) => this.replayManifest(m));
  }

  get(name: string): RegisteredTool | undefined {
    const tool = this.live.get(name);
    if (!tool) return undefined;
    return {
      manifest: this.replayManifest(tool.manifest),
      run: async (_args, ctx) => {
        const attempt = (this.runs.get(ctx.call_id) ?? 0) + 1;
        this.runs.set(ctx.call_id, attempt);
        const stop = this.stops.get(ctx.call_id)?.[attempt - 1];
        if (stop && !ctx.elicitationAnswer?.(stop.index)) throw stop;
        const queue = this.outcomes.get(ctx.call_id);
        // the last recorded outcome answers any further attempt (the comparison shows an extra one)
        const recorded = queue && queue.length > 1 ? queue.shift() : queue?.[0];
        if (!recorded) throw new Error(`replay diverged: no recorded outcome for ${ctx.call_id}`);
        if (recorded.result) return recorded.result;
        throw new Error(recorded.error);
      },
    };
  }

  validateArgs(name: string, args: Record<string, unknown>): ArgsValidation {
    return this.live.validateArgs(name, args);
  }

  // Nothing runs, so nothing needs a secret.
  private replayManifest(m: ToolManifest): ToolManifest {
    return { ...m, secrets: [] };
  }
}

/**
 * The permission outcomes the recorded task got, handed out per tool in the
 * order its calls reached the permission check: denied and hard-stopped calls
 * again, every other call allowed (the person's answers are in the log).
 */
export class ReplayPermissionPolicy extends PermissionService {
  private readonly queues = new Map<string, PermissionCheck[]>();
  private readonly input: PermissionCheck;

  constructor(events: readonly RuntimeEvent[]) {
    super();
    const seen = new Set<string>();
    for (const e of events) {
      // A question an MCP server asked (a form or a secret) made the call pass the gates once more.
      const asked = e.type === 'TASK_AWAITING_SECRET' && elicitedCall(e.payload.call_id) !== null;
      if (
        e.type !== 'TOOL_CALLED' &&
        e.type !== 'TOOL_FAILED' &&
        e.type !== 'TASK_AWAITING_PERMISSION' &&
        !asked
      )
        continue;
      if (seen.has(e.payload.call_id)) continue;
      const refused = e.type === 'TOOL_FAILED' ? e.payload.error_kind : null;
      if (e.type === 'TOOL_FAILED' && refused !== 'permission_denied' && refused !== 'hard_stop') continue;
      seen.add(e.payload.call_id);
      const check: PermissionCheck =
        e.type === 'TOOL_FAILED'
          ? {
              verdict: refused === 'hard_stop' ? 'hard_stop' : 'deny',
              rule: 'replay',
              reason: e.payload.error,
            }
          : { verdict: 'allow', rule: null, reason: 'replay' };
      this.queues.set(e.payload.tool, [...(this.queues.get(e.payload.tool) ?? []), check]);
    }
    const refusedInput = events.find(
      (e) =>
        e.type === 'TASK_FAILED' &&
        e.payload.stop_reason === 'permission_denied' &&
        e.payload.detail.startsWith(INPUT_REFUSED),
    );
    this.input =
      refusedInput?.type === 'TASK_FAILED'
        ? {
            verdict: 'hard_stop',
            rule: 'replay',
            reason: refusedInput.payload.detail.slice(INPUT_REFUSED.length),
          }
        : { verdict: 'allow', rule: null, reason: 'replay' };
  }

  check(s: PermissionSubject): PermissionCheck {
    return this.queues.get(s.manifest.name)?.shift() ?? { verdict: 'allow', rule: null, reason: 'replay' };
  }

  checkTaskInput(): PermissionCheck {
    return this.input;
  }

  requiredSecrets(): string[] {
    return [];
  }
}

/** The memory hits each recorded round's prompt showed, handed out again round by round. */
export class ReplayMemoryRecall extends MemoryRecall {
  private readonly rounds: MemoryHit[][];

  constructor(events: readonly RuntimeEvent[]) {
    super();
    this.rounds = events.flatMap((e) =>
      e.type === 'CONTEXT_BUILT'
        ? [e.payload.memory_hits.map((h) => ({ id: h.id, score: h.score, text: h.text ?? '' }))]
        : [],
    );
  }

  async recall(): Promise<MemoryHit[]> {
    return this.rounds.shift() ?? [];
  }
}

/**
 * The jitter a recorded task's retries drew, handed out again in order, so a
 * replay waits and records the same backoff (retry jitter is random: without
 * this a replayed retry names another delay). Each retry decision draws once
 * (backoffDelay); the draw that gives the recorded delay under `retry` is
 * solved for. A delay set by Retry-After takes any draw. Past the recorded
 * retries, `rest` draws.
 */
export function recordedJitter(
  events: readonly RuntimeEvent[],
  retry: Pick<RetrySettings, 'baseDelayMs' | 'maxDelayMs'> | undefined,
  rest: () => number = Math.random,
): () => number {
  const draws = events.flatMap((e) => {
    if (e.type !== 'GUARD_TRIGGERED' || e.payload.guard !== 'retry' || !retry) return [];
    const { delay_ms, next_attempt } = e.payload.data;
    if (typeof delay_ms !== 'number' || typeof next_attempt !== 'number') return [];
    const exp = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** Math.max(0, next_attempt - 2));
    if (exp <= 0) return [0];
    return [Math.min(1, Math.max(0, (delay_ms - exp / 2) / (exp / 2)))];
  });
  let i = 0;
  return () => (i < draws.length ? draws[i++] : rest());
}

/** One verdict the recorded critic gave: which critic, and for a model critic its call among the task's critic calls. */
interface RecordedVerdict {
  critic: 'model' | 'heuristic';
  /** the recorded call: the model it named, its index in the replay backend's critic role */
  call: { model: string; cursor: number } | null;
}

/**
 * The critic's part of a recorded task, reproduced offline: after each replayed
 * tool outcome the critic the recording used for that outcome scores it again,
 * a model critic against its recorded reply (the replay backend's critic role,
 * so no model is called), and the hook returns the critic's MODEL_CALLED /
 * MODEL_RESPONDED and CRITIC_RESULT for the replay to record and compare.
 *
 * Verdicts are matched to outcomes by tool call (in order, as an idempotent retry
 * is scored once per attempt): an outcome the recording did not score (no critic,
 * or the hook failed) gets none. A model critic's call is the critic
 * MODEL_RESPONDED just before its CRITIC_RESULT (one hook append, one batch; this
 * holds in a fork's copy too, where causation ids are rewritten).
 *
 * Memory is not part of it: a replay never writes memory (no write policy, no MEMORY_WRITTEN).
 * null when the recording has no critic result.
 */
export function replayCriticHook(
  events: readonly RuntimeEvent[],
  backend: ReplayBackend,
): ToolOutcomeHook | null {
  const verdicts = new Map<string, RecordedVerdict[]>();
  let criticCalls = 0;
  events.forEach((e, i) => {
    if (e.type === 'MODEL_RESPONDED' && e.payload.role === 'critic') criticCalls++;
    if (e.type !== 'CRITIC_RESULT' || e.payload.call_id === null) return;
    const before = events[i - 1];
    const call =
      e.payload.critic === 'model' && before?.type === 'MODEL_RESPONDED' && before.payload.role === 'critic'
        ? { model: before.payload.model, cursor: criticCalls - 1 }
        : null;
    const key = e.payload.call_id;
    verdicts.set(key, [...(verdicts.get(key) ?? []), { critic: e.payload.critic, call }]);
  });
  if (verdicts.size === 0) return null;
  const served = (call: { model: string; cursor: number }): CriticModel => ({
    model: call.model,
    backend: backend.backend,
    async complete(messages, { timeout_ms, signal }) {
      const res = await backend.complete({
        role: 'critic',
        messages,
        timeout_ms,
        signal,
        cursor: call.cursor,
      });
      return { content: res.content, usage: res.usage };
    },
  });
  return async (ctx) => {
    const verdict = verdicts.get(ctx.event.payload.call_id)?.shift();
    if (!verdict) return [];
    let critic: Critic;
    if (verdict.critic === 'heuristic') critic = new HeuristicCritic();
    else if (verdict.call) critic = new ModelCritic(served(verdict.call));
    // a model verdict with no recorded call cannot be reproduced: the replay shows it missing
    else return [];
    const input = criticInputOf(ctx.event);
    return criticEvents(input, await critic.evaluate(input));
  };
}

/** A recorded budget stop says how long the task had run; the decision's instant is not in the log. */
const ELAPSED = /task ran \d+ ms/g;

/** Events of a task that must come out of a replay the same, minus what differs by nature: ids, times, latency. */
export function replayView(events: readonly RuntimeEvent[]): Array<{ type: string; payload: unknown }> {
  const VOLATILE = new Set([
    'call_id',
    'request_id',
    'latency_ms',
    'duration_ms',
    'backend',
    'session_id',
    'source',
    'request_hash',
    'idempotency_key',
    'forked_from',
    // a child's id follows from its parent's, and a replay is a task of its own
    'child_task_id',
    // CRITIC_RESULT names the scored outcome by event id; its call_id is compared
    'target_event_id',
  ]);
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object')
      return Object.fromEntries(
        Object.entries(v)
          .filter(([k]) => !VOLATILE.has(k))
          .map(([k, x]) => [k, strip(x)]),
      );
    return v;
  };
  // The critic's part (its model calls, CRITIC_RESULT and usage) is reproduced from the log and
  // compared; what a replay never writes is not (see reproducedInReplay).
  return events.filter(reproducedInReplay).map((e) => {
    // The model name of a call is the serving backend's; a replay serves it from the log.
    // So is the orchestrator model a fork asked for (TASK_RECEIVED.model).
    const unnamed =
      e.type === 'MODEL_CALLED' ||
      e.type === 'TASK_RECEIVED' ||
      (e.type === 'MODEL_RESPONDED' && e.payload.error !== null);
    // The replay's clock is the recording's event times; the instant a time budget was judged
    // lies between two of them, so the elapsed time a timeout names is not compared.
    const timed =
      e.type === 'TASK_FAILED' && e.payload.stop_reason === 'timeout'
        ? { ...e.payload, detail: e.payload.detail.replace(ELAPSED, 'task ran (elapsed) ms') }
        : e.payload;
    return { type: e.type, payload: strip(unnamed ? { ...timed, model: undefined } : timed) };
  });
}

/** Where a replay first differs from its recording, by field, both values shown. */
export interface ReplayDivergence {
  /** 1-based index into the compared events (replayView) */
  at: number;
  /** e.g. "event 7 (MODEL_CALLED) payload.role: recorded 'orchestrator', replayed 'coder'" */
  detail: string;
}

/** The first field in which the replayed events differ from the recorded ones, null when they match. */
export function replayDivergence(
  recorded: readonly RuntimeEvent[],
  replayed: readonly RuntimeEvent[],
): ReplayDivergence | null {
  const a = replayView(recorded);
  const b = replayView(replayed);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (!a[i] || !b[i])
      return {
        at: i + 1,
        detail: `event ${i + 1}: recorded ${a[i]?.type ?? 'nothing'}, replayed ${b[i]?.type ?? 'nothing'}`,
      };
    const diff = firstDifference(a[i], b[i], '');
    if (!diff) continue;
    return {
      at: i + 1,
      detail: `event ${i + 1} (${a[i].type}) ${diff.path}: recorded ${shown(diff.recorded)}, replayed ${shown(diff.replayed)}`,
    };
  }
  return null;
}

function firstDifference(
  recorded: unknown,
  replayed: unknown,
  path: string,
): { path: string; recorded: unknown; replayed: unknown } | null {
  const bothObjects =
    recorded !== null && replayed !== null && typeof recorded === 'object' && typeof replayed === 'object';
  if (bothObjects && Array.isArray(recorded) === Array.isArray(replayed)) {
    const r = recorded as Record<string, unknown>;
    const p = replayed as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(r), ...Object.keys(p)])];
    for (const key of keys) {
      const at = Array.isArray(recorded) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
      const diff = firstDifference(r[key], p[key], at);
      if (diff) return diff;
    }
    return null;
  }
  return Object.is(recorded, replayed) ? null : { path, recorded, replayed };
}

function shown(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = typeof v === 'string' ? `'${v}'` : JSON.stringify(v);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

export async function recordedTask(
  store: { readWholeStream(id: string): Promise<RuntimeEvent[]> },
  taskId: string,
): Promise<RuntimeEvent[]> {
  const events = await store.readWholeStream(taskId);
  if (events.length === 0) throw new NotFoundError(`task ${taskId} not found`);
  return events;
}

export interface ReplayRequest {
  /** write the replayed task (ended, with its stop reason) to the live log; by default nothing is written there */
  save?: boolean;
}

export interface ReplayResult {
  task_id: string;
  progress: TaskProgress;
  /** the replayed task's events, as its own log holds them (saved: as the live log does) */
  events: RuntimeEvent[];
  /** whether they were written to the live log */
  saved: boolean;
}

/**
 * Re-run a recorded task offline as a new task (source `replay`): the model
 * answers, tool outcomes and critic replies come from its log, nothing is called
 * or run, and memory is not written. It runs under the settings its TASK_RECEIVED
 * recorded (a log without them: this process's), on a log of its own in memory
 * whose clock is the recording's timestamps (RecordedClock), so neither the
 * environment nor the wall clock changes its course, and nothing of it reaches
 * the live log unless `save` asks for the ended task to be written there.
 * The replay's events match the original's in type, order and payload (see replayView).
 */
export async function replayTask(
  options: ReplayOptions,
  sourceTaskId: string,
  request: ReplayRequest = {},
): Promise<ReplayResult> {
  const events = await recordedTask(options.store, sourceTaskId);
  const first = events[0];
  if (first.type !== 'TASK_RECEIVED') throw new NotFoundError(`stream ${sourceTaskId} is not a task`);
  const recordedSettings = first.payload.settings ?? null;
  const shaping = recordedSettings
    ? runShapingOf(recordedSettings)
    : { maxRounds: options.maxRounds, discipline: options.discipline };
  const clock = RecordedClock.fromRecording(events);
  const ownLog = new RecordedClockEventStore(clock);
  const backend = ReplayBackend.fromEvents(events);
  const critic = replayCriticHook(events, backend);
  // The recorded answers of every provider are in one list per role, in call order; the chain is
  // rebuilt under the recorded labels so the replay retries, switches and names providers the same.
  const [primary, ...fallbacks] = recordedProviderLabels(events);
  const app = await NestFactory.createApplicationContext(
    RuntimeModule.forParts({
      ...options,
      ...shaping,
      store: ownLog,
      clock,
      tools: new ReplayToolRegistry(options.tools, events),
      permissions: new ReplayPermissionPolicy(events),
      model: primary === undefined ? backend : new LabelledBackend(backend, primary),
      fallbackModels: fallbacks.map((label) => new LabelledBackend(backend, label)),
      sysUtil: backend,
      rng: recordedJitter(events, shaping.discipline?.retry, options.rng),
      // The live hooks (critic + memory write policy) are not run: the critic is reproduced
      // from the log and memory is not written (see replayCriticHook).
      hooks: critic ? [critic] : [],
      memory: new ReplayMemoryRecall(events),
      // the accept gate decides from what the recording saw in the workspace, not from the disk now
      workspace: new RecordedWorkspaceView(events),
      // a replay writes no checkpoints (and its comparison leaves them out, see replayView)
      checkpoints: null,
      // children are not run again: each delegation ends as the recording says its child did
      childTasks: new RecordedChildTasks(events),
    }),
    // the Nest logger stays whatever the process set (overriding it here would override it for everyone)
    { abortOnError: false },
  );
  const runtime = app.get(RuntimeController);
  let task_id: string;
  let progress: TaskProgress;
  try {
    ({ task_id } = await runtime.submit(
      {
        input: first.payload.input,
        budgets: first.payload.budgets,
        accept_checks: first.payload.accept_checks,
      },
      // the conversation the recording saw comes from its log, not from the session as it is now
      { source: 'replay', settings: recordedSettings, session_history: first.payload.session_history ?? [] },
    ));
    progress = await runtime.settled(task_id);
    // Questions MCP servers asked are answered as the recording answered them; anything else a
    // person answered was allowed by the replay's policy and never waits.
    const answers = recordedAnswers(events);
    for (let answer = answers.next(progress); answer; answer = answers.next(progress)) {
      await answer(runtime, task_id);
      progress = await runtime.settled(task_id);
    }
  } finally {
    await app.close();
  }
  let replayed = await ownLog.readWholeStream(task_id);
  if (request.save) {
    // an unfinished task in the live log would be resumed there, with the live model
    if (!progress.final)
      throw new IllegalStateError(`replay of ${sourceTaskId} did not end (${progress.status}); not saved`);
    ({ events: replayed } = await options.store.append(
      task_id,
      replayed.map(
        (e) =>
          ({
            type: e.type,
            payload: e.payload,
            event_id: e.event_id,
            causation_id: e.causation_id,
            correlation_id: e.correlation_id,
            session_id: e.session_id,
            created_at: e.created_at,
          }) as NewEvent,
      ),
      { expected: 'no_stream' },
    ));
  }
  return { task_id, progress, events: replayed, saved: request.save === true };
}

export type ReplayOptions = Omit<
  RuntimeParts,
  'permissions' | 'model' | 'fallbackModels' | 'sysUtil' | 'hooks' | 'memory'
>;

/**
 * The recording's answers to the questions MCP servers asked, by elicitation id in order: a form's
 * decision and content again; a secret, whose value the log never held, as random hex (the replayed
 * tool answers from the log, so no server sees it; redacted like any secret, it must match nothing).
 */
function recordedAnswers(events: readonly RuntimeEvent[]) {
  const forms = new Map<string, Array<Extract<RuntimeEvent, { type: 'PERMISSION_RESOLVED' }>['payload']>>();
  for (const e of events)
    if (e.type === 'PERMISSION_RESOLVED' && elicitedCall(e.payload.call_id))
      forms.set(e.payload.call_id, [...(forms.get(e.payload.call_id) ?? []), e.payload]);
  return {
    next(p: TaskProgress): ((runtime: RuntimeController, taskId: string) => Promise<void>) | null {
      if (p.final) return null;
      const form = p.pendingPermission;
      if (form && elicitedCall(form.call_id)) {
        const recorded = forms.get(form.call_id)?.shift();
        if (!recorded) return null;
        return (runtime, taskId) =>
          runtime.resolvePermission(taskId, form.request_id, recorded.decision, recorded.content);
      }
      const secret = p.pendingSecret;
      if (secret && elicitedCall(secret.call_id))
        return (runtime, taskId) =>
          runtime.provideSecret(taskId, secret.request_id, randomBytes(24).toString('hex'));
      return null;
    },
  };
}
