import { EventPayload, ExecutionDirective, ModelToolCall, StopReason } from '@runledger/contracts';
import { DIRECTIVE_RESPONSE_SCHEMA, parseDirective } from '../model/directive-parser';
import { BuiltContext } from './context-builder';
import { ModelGateway } from './model-gateway';
import {
  CUT_OFF,
  ChatMessage,
  ModelBackend,
  ModelCallError,
  ModelRequest,
  ModelResponse,
  cutOff,
} from '../model/model-backend';
import { ArgsCheck, directiveFromToolCalls } from './native-tool-calls';
import {
  COMPLETION_REMINDER,
  FABRICATION_NOTE,
  classifyOrchestratorText,
  completionStep,
} from '../discipline/completion';
import { NO_RETRIES, RetrySettings } from '../discipline/settings';
import { describeStop } from '../discipline/stop-reasons';
import { guardEvent } from '../discipline/retry-runner';
import { openTodoLines } from '../discipline/todos';
import { COMPACTION_SYSTEM } from '../discipline/prompt-budget';
import { NOT_UNDERSTOOD, SYS_UTIL } from '../model/sys-util';
import { callThroughChain } from './provider-chain';
import { Stop } from '../ports';
import { TaskWriter } from '../log/task-writer';
import { TaskProgress } from '../log/progress';
import { clientArgsProblem } from './engine/client-tools';

export type RouterSource = EventPayload<'ROUTER_DECIDED'>['source'];

export type RouterOutcome =
  | {
      kind: 'decided';
      directive: ExecutionDirective;
      source: RouterSource;
      fallback_reason: string | null;
      attempts: number;
      /** the native tool calls the directive was made of (tools protocol) */
      tool_calls?: ModelToolCall[];
    }
  /** the orchestrator answered without attempting a directive: reminded, the next round asks again */
  | { kind: 'no_directive' }
  /** `result`: what the task answers though it stops (sys_util's help text for input it cannot handle) */
  | { kind: 'stop'; stop: Stop; result?: string | null };

/** Run discipline as the router applies it (libs/runtime/src/discipline). */
export interface RouterPolicy {
  retry: RetrySettings;
  /** directive-less answers in a row before missing_completion_signal; null: the completion protocol is off (prose takes the correction path) */
  completionMaxMisses: number | null;
  rng?: () => number;
}

/** Without run discipline: no retries, fall back at the first failure; no completion protocol. */
export const NO_RETRY_POLICY: RouterPolicy = {
  retry: NO_RETRIES,
  completionMaxMisses: null,
};

export interface RouterModels {
  orchestrator: ModelBackend;
  /**
   * Providers asked in order once the orchestrator's retries ran out
   * (provider_error / rate_limited / timeout), each with retries of its own,
   * before sys_util. Labels unique (see model/providers).
   */
  fallbacks?: ModelBackend[];
  /** the model-free fallback (a replay backend when replaying, so fallbacks replay too) */
  sysUtil: ModelBackend;
}

/** The completion reminder under native tool calling, where the answer is plain text rather than a JSON directive. */
export const TOOLS_COMPLETION_REMINDER =
  'Your last reply had neither text nor a tool call. Call a tool to act, reply with the final answer as text when you are done, ' +
  'or call runledger_fail when the task cannot be done.';

/** Tool arguments are checked by the registry that will run them; without one, any arguments pass to the engine's own check. */
const ANY_ARGS: ArgsCheck = () => null;

type ReadReply =
  | { kind: 'directive'; directive: ExecutionDirective; tool_calls?: ModelToolCall[] }
  /** no directive attempted (prose, or nothing): the completion protocol reminds, or without it the correction turn asks again */
  | { kind: 'no_attempt' | 'invalid'; error: string; attempted: boolean; correction: ChatMessage[] };

export const correctionPrompt = (error: string): string =>
  `Your reply was not a valid ExecutionDirective (${error}). Reply again with exactly one JSON object as described, and nothing else.`;

interface Fallback {
  reason: string;
  /** the provider that failed last, when one was asked */
  from: string | null;
  /** the stop reason when sys_util cannot help either */
  stop_reason: StopReason;
  /** no model was meant to answer: input sys_util cannot handle ends not_understood, not with the model's failure */
  noModelMeant: boolean;
}

/**
 * The orchestrator is sys_util itself (no model meant to answer): it answers the orchestrator role
 * as sys_util, live (SysUtilBackend) or replayed from a recording whose orchestrator it was.
 */
const isSysUtil = (orchestrator: ModelBackend): boolean => orchestrator.modelFor('orchestrator') === SYS_UTIL;

/**
 * Orchestrator -> validated ExecutionDirective. An invalid reply gets one
 * correction round; then, like a missing orchestrator or a failed call, the
 * sys_util fallback decides. An invalid directive is never returned.
 */
export class AsyncRouter {
  constructor(
    private readonly models: RouterModels,
    private readonly gateway: ModelGateway,
    private readonly timeoutMs: number,
    private readonly policy: RouterPolicy = NO_RETRY_POLICY,
    private readonly argsCheck: ArgsCheck = ANY_ARGS,
  ) {}

  async decide(
    writer: TaskWriter,
    round: number,
    ctx: BuiltContext,
    signal: AbortSignal,
  ): Promise<RouterOutcome> {
    const orchestrator = this.models.orchestrator;
    let fallback: Fallback | null = null;
    if (isSysUtil(orchestrator)) return this.sysUtil(writer, round, ctx, signal, null);
    if (!orchestrator.modelFor('orchestrator')) {
      fallback = {
        reason: 'orchestrator_missing: no orchestrator model configured',
        from: null,
        stop_reason: 'validation_error',
        noModelMeant: true,
      };
    } else {
      let messages = ctx.messages;
      for (let attempt = 1; attempt <= 2 && !fallback; attempt++) {
        const called = await this.callOrchestrator(writer, round, this.request(messages, ctx, signal));
        if (called.kind === 'stop') return called;
        if (called.kind === 'fallback') {
          fallback = called.fallback;
          break;
        }
        const res = called.res;
        const reply = await this.read(writer, round, res);
        if (reply.kind === 'directive')
          return {
            kind: 'decided',
            directive: reply.directive,
            source: this.sourceOf(res.model),
            fallback_reason: called.via,
            attempts: attempt,
            ...(reply.tool_calls ? { tool_calls: reply.tool_calls } : {}),
          };
        if (reply.kind === 'no_attempt' && this.policy.completionMaxMisses !== null)
          return this.noDirective(
            writer,
            round,
            this.policy.completionMaxMisses,
            res.tool_calls ? TOOLS_COMPLETION_REMINDER : COMPLETION_REMINDER,
          );
        const error = reply.error;
        if (attempt === 2) {
          fallback = {
            reason: `invalid_directive: ${error}`,
            from: called.provider,
            stop_reason: 'validation_error',
            noModelMeant: false,
          };
          break;
        }
        await writer.append([
          {
            type: 'GUARD_TRIGGERED',
            payload: {
              guard: 'correction',
              round,
              detail: error,
              data: { attempted: reply.attempted },
            },
          },
        ]);
        messages = [...messages, ...reply.correction];
      }
    }
    await writer.append([
      {
        type: 'GUARD_TRIGGERED',
        payload: {
          guard: 'fallback',
          round,
          detail: fallback!.reason,
          data: fallback!.from === null ? { to: SYS_UTIL } : { from: fallback!.from, to: SYS_UTIL },
        },
      },
    ]);
    return this.sysUtil(writer, round, ctx, signal, fallback);
  }

  /**
   * What a reply says. Tools protocol (the reply lists its tool calls, maybe
   * none): the calls are the directive, checked against the tools' schemas,
   * and text with no call is the answer. JSON protocol: the directive in the
   * text. Tool results written by the model are never evidence: they are cut
   * before anything reads the reply.
   */
  /** The client's own tools (AG-UI frontend tools) are checked against the schemas it offered; the rest by the registry. */
  private argsCheckFor(p: TaskProgress): ArgsCheck {
    if (p.clientTools.size === 0) return this.argsCheck;
    return (name, args) => {
      const offered = p.clientTools.get(name);
      return offered ? clientArgsProblem(offered, args) : this.argsCheck(name, args);
    };
  }

  private async read(writer: TaskWriter, round: number, res: ModelResponse): Promise<ReadReply> {
    const text = classifyOrchestratorText(res.content);
    if (cutOff(res))
      return {
        kind: 'invalid',
        error: CUT_OFF,
        attempted: true,
        correction: [
          { role: 'assistant', content: text.cleaned },
          {
            role: 'user',
            content:
              'Your last reply was cut off at the output token limit (finish_reason "length"). Reply again in full, and shorter, so that the whole of it fits.',
          },
        ],
      };
    if (text.fabricated.length > 0)
      await writer.append([
        guardEvent('correction', round, FABRICATION_NOTE, { fabricated: text.fabricated.length }),
      ]);
    if (res.tool_calls && res.tool_calls.length > 0) {
      const native = directiveFromToolCalls(res.tool_calls, this.argsCheckFor(writer.progress));
      if (native.ok) return { kind: 'directive', directive: native.directive, tool_calls: res.tool_calls };
      return {
        kind: 'invalid',
        error: native.error,
        attempted: true,
        correction: [
          { role: 'assistant', content: text.cleaned, tool_calls: native.calls },
          ...native.answers,
        ],
      };
    }
    if (res.tool_calls) {
      const answer = text.cleaned.trim();
      if (answer) return { kind: 'directive', directive: { type: 'respond', content: answer } };
      const error = 'the reply had neither text nor a tool call';
      return {
        kind: 'no_attempt',
        error,
        attempted: false,
        correction: [
          { role: 'user', content: `${error}. Call a tool, or answer in text when the task is done.` },
        ],
      };
    }
    if (text.kind === 'directive') return { kind: 'directive', directive: text.directive };
    return {
      kind: text.kind === 'no_attempt' ? 'no_attempt' : 'invalid',
      error: text.error,
      attempted: text.kind === 'attempted_directive',
      correction: [
        { role: 'assistant', content: text.cleaned },
        { role: 'user', content: correctionPrompt(text.error) },
      ],
    };
  }

  /** The configured model, then the fallback providers that serve `role`. */
  private chain(role: 'orchestrator' | 'utility' = 'orchestrator'): ModelBackend[] {
    return [
      this.models.orchestrator,
      ...(this.models.fallbacks ?? []).filter((b) => b.modelFor(role) !== null),
    ];
  }

  /**
   * One orchestrator request down the provider chain (callThroughChain):
   * retries, then the next provider, then the sys_util fallback. An
   * authentication error stops at once, whichever provider it came from: no
   * retry, no walk down the chain.
   */
  private async callOrchestrator(
    writer: TaskWriter,
    round: number,
    request: Omit<ModelRequest, 'role' | 'onChunk' | 'cursor'>,
  ): Promise<
    | { kind: 'ok'; res: ModelResponse; provider: string; via: string | null }
    | { kind: 'fallback'; fallback: Fallback }
    | { kind: 'stop'; stop: Stop }
  > {
    const chain = this.chain();
    const out = await callThroughChain({
      gateway: this.gateway,
      writer,
      chain,
      role: 'orchestrator',
      round,
      request,
      streamRespond: true,
      retry: this.policy.retry,
      rng: this.policy.rng,
    });
    if (out.ok)
      return {
        kind: 'ok',
        res: out.res,
        provider: out.provider.label,
        via:
          out.position === 0
            ? null
            : (writer.fold.providers.lastSwitch('orchestrator') ?? `served by ${out.provider.label}`),
      };
    if (request.signal?.aborted) throw out.error;
    const named = chain.length > 1 ? ` (${out.provider.label})` : '';
    const reason = `${out.failure.kind}: ${out.failure.message}${named}`;
    if (out.decision.action === 'stop')
      return {
        kind: 'stop',
        stop: {
          stop_reason: out.decision.stop_reason,
          detail: describeStop(out.decision.stop_reason, reason),
        },
      };
    return {
      kind: 'fallback',
      fallback: { reason, from: out.provider.label, stop_reason: out.failure.kind, noModelMeant: false },
    };
  }

  /** The orchestrator calls tools natively: the context offers them as functions and sends decided rounds as tool turns. */
  speaksToolCalls(): boolean {
    return this.models.orchestrator.speaksToolCalls('orchestrator');
  }

  /** A model serves the utility role, so old history can be summarised instead of dropped. */
  canCompact(): boolean {
    return !isSysUtil(this.models.orchestrator) && this.models.orchestrator.modelFor('utility') !== null;
  }

  /**
   * Summarise old rounds through the utility role; the summary is recorded
   * (GUARD_TRIGGERED compaction) and replaces them in the history. False when
   * the model failed: the caller trims instead.
   */
  async compact(
    writer: TaskWriter,
    round: number,
    c: NonNullable<BuiltContext['compaction']>,
    signal: AbortSignal,
  ): Promise<boolean> {
    // Down the provider chain like the orchestrator; when it runs out the caller trims.
    const out = await callThroughChain({
      gateway: this.gateway,
      writer,
      chain: this.chain('utility'),
      role: 'utility',
      round,
      request: {
        messages: [
          { role: 'system', content: `${COMPACTION_SYSTEM} Stay under ${c.summaryTokens * 4} characters.` },
          { role: 'user', content: c.text },
        ],
        timeout_ms: this.timeoutMs,
        signal,
      },
      retry: this.policy.retry,
      rng: this.policy.rng,
    });
    if (!out.ok) {
      if (signal.aborted || !(out.error instanceof ModelCallError)) throw out.error;
      return false;
    }
    const summary = out.res.content.slice(0, c.summaryTokens * 4);
    await writer.append([
      guardEvent(
        'compaction',
        round,
        c.reason === 'session_budget'
          ? `near the session budget: the session's earlier tasks (rounds ${c.rounds.join(', ')}) summarised by the utility role`
          : `rounds ${c.rounds.join(', ')} summarised by the utility role`,
        { rounds: c.rounds, summary, ...(c.reason ? { reason: c.reason } : {}) },
      ),
    ]);
    return true;
  }

  /** The completion protocol: remind and let the next round ask again, until too many misses in a row. */
  private async noDirective(
    writer: TaskWriter,
    round: number,
    maxMisses: number,
    reminder: string,
  ): Promise<RouterOutcome> {
    const verdict = completionStep(writer.fold.completion, 'no_attempt', maxMisses);
    if (verdict.action === 'stop')
      return {
        kind: 'stop',
        stop: {
          stop_reason: 'missing_completion_signal',
          detail: describeStop('missing_completion_signal', verdict.detail),
        },
      };
    // the todos still open are what the task is missing: the reminder names them
    const open = openTodoLines(writer.progress.todos);
    await writer.append([
      guardEvent(
        'completion_reminder',
        round,
        `${verdict.action === 'remind' ? verdict.detail : 'no directive'}. ${reminder}${open ? `\nOpen todos:\n${open}` : ''}`,
      ),
    ]);
    return { kind: 'no_directive' };
  }

  private sourceOf(model: string): RouterSource {
    return model === SYS_UTIL
      ? 'sys_util'
      : this.models.orchestrator.backend === 'replay'
        ? 'replay'
        : 'orchestrator';
  }

  private request(
    messages: BuiltContext['messages'],
    ctx: BuiltContext,
    signal: AbortSignal,
  ): Omit<ModelRequest, 'role' | 'onChunk' | 'cursor'> {
    return {
      messages,
      view: ctx.view,
      timeout_ms: this.timeoutMs,
      signal,
      tools: ctx.functions,
      ...(ctx.toolChoice ? { tool_choice: ctx.toolChoice } : {}),
      response_schema: DIRECTIVE_RESPONSE_SCHEMA,
    };
  }

  private async sysUtil(
    writer: TaskWriter,
    round: number,
    ctx: BuiltContext,
    signal: AbortSignal,
    fallback: Fallback | null,
  ): Promise<RouterOutcome> {
    const request = this.request(ctx.messages, ctx, signal);
    const res = await this.gateway.call({
      writer,
      backend: this.models.sysUtil,
      role: 'orchestrator',
      round,
      // after a configured model failed, sys_util says so rather than that no model is configured
      request:
        fallback?.from != null && request.view
          ? { ...request, view: { ...request.view, fallback_reason: fallback.reason } }
          : request,
    });
    const parsed = parseDirective(res.content);
    if (!parsed.ok)
      return {
        kind: 'stop',
        stop: {
          stop_reason: 'validation_error',
          detail: `sys_util produced an invalid directive: ${parsed.error}`,
        },
      };
    // sys_util did not understand the input: after a model failed, that failure is why the task stops; with no
    // model meant to answer it stops not_understood, and its help text (what it does understand) is the answer.
    if (res.finish_reason === NOT_UNDERSTOOD) {
      if (fallback && !fallback.noModelMeant)
        return { kind: 'stop', stop: { stop_reason: fallback.stop_reason, detail: fallback.reason } };
      return {
        kind: 'stop',
        stop: { stop_reason: 'not_understood', detail: describeStop('not_understood') },
        result: parsed.directive.type === 'respond' ? parsed.directive.content : null,
      };
    }
    return {
      kind: 'decided',
      directive: parsed.directive,
      source: 'sys_util',
      fallback_reason: fallback?.reason ?? null,
      attempts: 1,
    };
  }
}
