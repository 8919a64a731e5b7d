import { EventPayload, ExecutionDirective, StopReason } from '@runledger/contracts';
import { parseDirective } from './directive-parser';
import { BuiltContext } from './context-builder';
import { ModelGateway } from './model-gateway';
import { ModelBackend, ModelCallError, ModelRequest } from './model/model-backend';
import { NOT_UNDERSTOOD, SYS_UTIL } from './model/sys-util';
import { Stop } from './ports';
import { TaskWriter } from './task-writer';

export type RouterSource = EventPayload<'ROUTER_DECIDED'>['source'];

export type RouterOutcome =
  | { kind: 'decided'; directive: ExecutionDirective; source: RouterSource; fallback_reason: string | null; attempts: number }
  | { kind: 'stop'; stop: Stop };

export interface RouterModels {
  orchestrator: ModelBackend;
  /** the model-free fallback (a replay backend when replaying, so fallbacks replay too) */
  sysUtil: ModelBackend;
}

export const correctionPrompt = (error: string): string =>
  `Your reply was not a valid ExecutionDirective (${error}). Reply again with exactly one JSON object as described, and nothing else.`;

interface Fallback {
  reason: string;
  /** the stop reason when sys_util cannot help either */
  stop_reason: StopReason;
  /** no model was meant to answer: sys_util's help text is a fine answer */
  helpIsAnswer: boolean;
}

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
  ) {}

  async decide(writer: TaskWriter, round: number, ctx: BuiltContext, signal: AbortSignal): Promise<RouterOutcome> {
    const orchestrator = this.models.orchestrator;
    let fallback: Fallback | null = null;
    if (orchestrator.backend === SYS_UTIL) return this.sysUtil(writer, round, ctx, signal, null);
    if (!orchestrator.modelFor('orchestrator')) {
      fallback = { reason: 'orchestrator_missing: no orchestrator model configured', stop_reason: 'validation_error', helpIsAnswer: true };
    } else {
      let messages = ctx.messages;
      for (let attempt = 1; attempt <= 2 && !fallback; attempt++) {
        try {
          const res = await this.gateway.call({ writer, backend: orchestrator, role: 'orchestrator', round, request: this.request(messages, ctx, signal), streamRespond: true });
          const parsed = parseDirective(res.content);
          if (parsed.ok) return { kind: 'decided', directive: parsed.directive, source: this.sourceOf(res.model), fallback_reason: null, attempts: attempt };
          if (attempt === 2) {
            fallback = { reason: `invalid_directive: ${parsed.error}`, stop_reason: 'validation_error', helpIsAnswer: false };
            break;
          }
          await writer.append([{ type: 'GUARD_TRIGGERED', payload: { guard: 'correction', round, detail: parsed.error, data: { attempted: parsed.attempted } } }]);
          messages = [...messages, { role: 'assistant', content: res.content }, { role: 'user', content: correctionPrompt(parsed.error) }];
        } catch (err) {
          if (!(err instanceof ModelCallError)) throw err;
          if (signal.aborted) throw err;
          fallback = { reason: `${err.kind}: ${err.message}`, stop_reason: err.kind, helpIsAnswer: false };
        }
      }
    }
    await writer.append([{ type: 'GUARD_TRIGGERED', payload: { guard: 'fallback', round, detail: fallback!.reason, data: { to: SYS_UTIL } } }]);
    return this.sysUtil(writer, round, ctx, signal, fallback);
  }

  private sourceOf(model: string): RouterSource {
    return model === SYS_UTIL ? 'sys_util' : this.models.orchestrator.backend === 'replay' ? 'replay' : 'orchestrator';
  }

  private request(messages: BuiltContext['messages'], ctx: BuiltContext, signal: AbortSignal): Omit<ModelRequest, 'role' | 'onChunk' | 'cursor'> {
    return { messages, view: ctx.view, timeout_ms: this.timeoutMs, signal };
  }

  private async sysUtil(writer: TaskWriter, round: number, ctx: BuiltContext, signal: AbortSignal, fallback: Fallback | null): Promise<RouterOutcome> {
    const res = await this.gateway.call({ writer, backend: this.models.sysUtil, role: 'orchestrator', round, request: this.request(ctx.messages, ctx, signal) });
    const parsed = parseDirective(res.content);
    if (!parsed.ok) return { kind: 'stop', stop: { stop_reason: 'validation_error', detail: `sys_util produced an invalid directive: ${parsed.error}` } };
    // sys_util did not understand the input: the help text is the answer only when no model was meant to answer.
    if (fallback && res.finish_reason === NOT_UNDERSTOOD && !fallback.helpIsAnswer) {
      return { kind: 'stop', stop: { stop_reason: fallback.stop_reason, detail: fallback.reason } };
    }
    return { kind: 'decided', directive: parsed.directive, source: 'sys_util', fallback_reason: fallback?.reason ?? null, attempts: 1 };
  }
}
