import {
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
import { ModelScript, ScriptItem, ScriptedBackend } from '../model/scripted-backend';
import { ModelBackend, ModelRequest, ModelResponse } from '../model/model-backend';
import { criticModelOf } from '../model/critic-model';
import { SYS_UTIL } from '../model/sys-util-name';
import { RetrySettings } from '../discipline/settings';
import { elicitedCall } from '../log/progress';
import { rawChunksFor } from '../loop/respond-stream';
import { INPUT_REFUSED, MemoryHit, MemoryRecall, ToolOutcomeHook } from '../ports';

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
    const thoughts = new Map<string, string[]>();
    for (const e of events)
      if (e.type === 'OUTPUT_CHUNK')
        chunks.set(e.payload.call_id, [...(chunks.get(e.payload.call_id) ?? []), e.payload.delta]);
      else if (e.type === 'REASONING_CHUNK')
        thoughts.set(e.payload.call_id, [...(thoughts.get(e.payload.call_id) ?? []), e.payload.delta]);
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
            // the stored conversation as the recording met it: replay calls no server
            ...(p.continuation ? { continuation: p.continuation } : {}),
            ...(p.reasoning ? { reasoning: p.reasoning } : {}),
            // streamed as recorded: none when the recording streamed none
            reasoning_chunks: thoughts.get(p.call_id) ?? [],
          };
      (script[p.role] ??= []).push(item);
    }
    const replay = new ReplayBackend(script);
    const [first] = events;
    if (first?.type === 'TASK_RECEIVED') replay.recordedProtocol = first.payload.settings?.model_protocol;
    return replay;
  }
}

/**
 * sys_util as the recording's fallbacks met it: its recorded answers given as
 * sys_util gives them, in process and as JSON directives with no native tool
 * calls, whatever protocol the recorded model spoke (the model's replay itself
 * would answer as that model, with tool_calls). It draws from the replay's one
 * list per role under the replay's adapter name, so the call cursor counts
 * the model's calls and sys_util's together, in the recorded order.
 */
export class ReplayedSysUtil extends ModelBackend {
  readonly backend: string;

  constructor(private readonly recorded: ReplayBackend) {
    super();
    this.backend = recorded.backend;
  }

  override get answersInProcess(): boolean {
    return true;
  }

  modelFor(role: Role): string | null {
    return role === 'orchestrator' ? SYS_UTIL : null;
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const { tool_calls: _none, ...answer } = await this.recorded.complete(request);
    return answer;
  }
}

type RecordedOutcome = { result: ToolResult | null; error: string; order: number };

const DIVERGED_OUTCOME_WAIT_MS = 2_000;

type Deferred = { promise: Promise<void>; resolve: () => void; settled: boolean };

function deferred(): Deferred {
  let resolve!: () => void;
  const d: Deferred = {
    promise: new Promise<void>((r) => (resolve = r)),
    resolve: () => {
      d.settled = true;
      resolve();
    },
    settled: false,
  };
  return d;
}

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
 * Calls that ran side by side (a plan's parallel steps, a reply's several native tool calls) are answered
 * in the order the recording completed them, so their outcomes reach the log in that order again.
 */
export class ReplayToolRegistry extends ToolRegistry {
  private readonly outcomes = new Map<string, RecordedOutcome[]>();
  private readonly stops: Map<string, Array<RecordedStop | null>>;
  private readonly runs = new Map<string, number>();
  private readonly answered: Array<Deferred>;

  constructor(
    private readonly live: ToolRegistry,
    events: readonly RuntimeEvent[],
  ) {
    super();
    let order = 0;
    const add = (callId: string, outcome: Omit<RecordedOutcome, 'order'>) =>
      this.outcomes.set(callId, [...(this.outcomes.get(callId) ?? []), { ...outcome, order: order++ }]);
    for (const e of events) {
      if (e.type === 'TOOL_COMPLETED') add(e.payload.call_id, { result: e.payload.result, error: '' });
      if (e.type === 'TOOL_FAILED' && e.payload.error_kind === 'tool_error')
        add(e.payload.call_id, { result: e.payload.result, error: e.payload.error });
    }
    this.answered = Array.from({ length: order }, deferred);
    this.stops = recordedStops(events);
  }

  /**
   * Waits until every outcome the recording completed before this one was handed out, and a turn of the
   * event loop after it, so its outcome event was appended first. An outcome the replay never asks for
   * (a diverged replay) holds the next one back for a bounded time only; the comparison shows the divergence.
   */
  private async turnOf(order: number): Promise<void> {
    if (order > 0 && !this.answered[order - 1].settled) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.answered[order - 1].promise,
        new Promise<void>((resolve) => (timer = setTimeout(resolve, DIVERGED_OUTCOME_WAIT_MS))),
      ]);
      clearTimeout(timer);
    }
    setImmediate(() => this.answered[order].resolve());
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
        await this.turnOf(recorded.order);
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
  const served = (call: { model: string; cursor: number }): CriticModel => criticModelOf(backend, call)!;
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
