import { NewEvent, newId } from '@runledger/contracts';
import { Critic, CriticInput, criticEvents } from '@runledger/critic';
import { MemoryService } from './memory-service';
import {
  DEFAULT_MEMORY_POLICY,
  MemoryPolicyConfig,
  OutcomeTool,
  ToolOutcomeEvent,
  decide,
  dedupe,
} from './memory-write-policy';

/** The runtime's ToolOutcomeHook context, restated so memory does not import runtime. */
export interface OutcomeContext {
  task_id: string;
  session_id: string;
  event: ToolOutcomeEvent;
  manifest: OutcomeTool;
}

export interface CriticMemoryHookDeps {
  critic: Critic;
  /** null: score only, remember nothing */
  memory: MemoryService | null;
  policy?: MemoryPolicyConfig;
}

export function criticInputOf(event: ToolOutcomeEvent): CriticInput {
  const result = event.payload.result;
  return {
    target_event_id: event.event_id,
    call_id: event.payload.call_id,
    tool: event.payload.tool,
    ok: event.type === 'TOOL_COMPLETED' && result?.ok !== false,
    output: result?.output ?? null,
    error: event.type === 'TOOL_FAILED' ? event.payload.error : (result?.error ?? null),
    metadata: result?.metadata ?? {},
  };
}

/**
 * After each tool outcome: the critic scores it (CRITIC_RESULT), the write
 * policy decides, and a write becomes a MEMORY_WRITTEN event caused by the
 * critic result and naming the outcome as its source. The runtime appends the
 * returned events to the task; memory applies them from the log on its next sync.
 * A critic failure yields a CRITIC_RESULT with the error and no write.
 */
export function createCriticMemoryHook(
  deps: CriticMemoryHookDeps,
): (ctx: OutcomeContext) => Promise<NewEvent[]> {
  const policy = deps.policy ?? DEFAULT_MEMORY_POLICY;
  return async (ctx) => {
    const input = criticInputOf(ctx.event);
    const verdict = await deps.critic.evaluate(input);
    const criticEventId = newId('evt');
    const events = criticEvents(input, verdict, criticEventId);
    if (!deps.memory) return events;
    const candidate = decide(ctx.event, ctx.manifest, verdict.score, policy);
    if (candidate.op === 'none') return events;
    const nearest = await deps.memory.nearest(await deps.memory.embed(candidate.text), candidate.kind);
    const decision = dedupe(candidate, nearest, policy);
    const meta = { call_id: ctx.event.payload.call_id, tool: ctx.event.payload.tool, critic: verdict.critic };
    if (decision.op === 'insert') {
      const payload = deps.memory.insertPayload({ ...decision, metadata: meta }, ctx.event.event_id);
      events.push({ type: 'MEMORY_WRITTEN', causation_id: criticEventId, payload });
    } else if (decision.op === 'reinforce') {
      events.push({
        type: 'MEMORY_WRITTEN',
        causation_id: criticEventId,
        payload: {
          op: 'reinforce',
          entry_id: decision.entry_id,
          kind: decision.kind,
          text: decision.text,
          weight: decision.weight,
          previous_weight: decision.previous_weight,
          source: 'critic',
          source_event_id: ctx.event.event_id,
          reason: decision.reason,
          embedding_model: deps.memory.embeddingModel,
          embedding_dim: deps.memory.embeddingDim,
          metadata: meta,
        },
      });
    }
    return events;
  };
}
