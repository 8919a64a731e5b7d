import { NewEvent, RuntimeEvent, StopReason, newId } from '@runledger/contracts';
import { Critic, criticEvents, criticInputOf } from '@runledger/critic';
import { MemoryService } from './memory-service';
import {
  DEFAULT_MEMORY_POLICY,
  InsertDecision,
  decideAtEnd,
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
  /** the task's log as its writer folded it: its memory writes not committed yet too */
  events: readonly RuntimeEvent[];
}

export interface CriticMemoryHookDeps {
  critic: Critic;
  /** null: score only, remember nothing */
  memory: MemoryService | null;
  policy?: MemoryPolicyConfig;
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
    const meta = { call_id: ctx.event.payload.call_id, tool: ctx.event.payload.tool, critic: verdict.critic };
    const written = await memoryWrite(deps.memory, candidate, policy, ctx.events, ctx.session_id, {
      source_event_id: ctx.event.event_id,
      causation_id: criticEventId,
      reinforce_source: 'critic',
      metadata: meta,
    });
    return written ? [...events, written] : events;
  };
}

/**
 * A candidate insert as the MEMORY_WRITTEN event to append: an insert, a reinforce of its near-duplicate,
 * or nothing. Decided through MemoryService.decideWrite, so a task deciding at the same moment sees it.
 */
async function memoryWrite(
  memory: MemoryService,
  candidate: InsertDecision,
  policy: MemoryPolicyConfig,
  /** the task's log as its writer folded it, so a write sees the task's own earlier writes */
  taskEvents: readonly RuntimeEvent[],
  /** the writing task's session */
  sessionId: string | null,
  provenance: {
    source_event_id: string | null;
    causation_id: string | null;
    reinforce_source: 'critic' | 'system';
    metadata: Record<string, unknown>;
  },
): Promise<NewEvent | null> {
  const vector = await memory.embed(candidate.text);
  return memory.decideWrite(vector, candidate.kind, taskEvents, sessionId, (nearest) => {
    const decision = dedupe(candidate, nearest, policy);
    if (decision.op === 'none') return null;
    const payload =
      decision.op === 'insert'
        ? memory.insertPayload({ ...decision, metadata: provenance.metadata }, provenance.source_event_id)
        : {
            op: 'reinforce' as const,
            entry_id: decision.entry_id,
            kind: decision.kind,
            // no entry's text: only the writer's own, when the entry may never commit (see dedupe)
            ...(decision.text === undefined ? {} : { text: decision.text }),
            weight: decision.weight,
            previous_weight: decision.previous_weight,
            source: provenance.reinforce_source,
            source_event_id: provenance.source_event_id,
            reason: decision.reason,
            embedding_model: memory.embeddingModel,
            embedding_dim: memory.embeddingDim,
            metadata: provenance.metadata,
          };
    return { type: 'MEMORY_WRITTEN', event_id: newId('evt'), causation_id: provenance.causation_id, payload };
  });
}

/** The runtime's LoopGuard.beforeEnd, restated so memory does not import runtime. */
export interface TaskEndContext {
  events: readonly RuntimeEvent[];
  stop: { stop_reason: StopReason; detail: string };
  result: string | null;
}

/** The task is a replay (TASK_RECEIVED source `replay`): re-run offline from another task's log. */
const isReplay = (events: readonly RuntimeEvent[]): boolean =>
  events[0]?.type === 'TASK_RECEIVED' && events[0].payload.source === 'replay';

/**
 * A loop guard that, when a task completes, writes its summary and its fully
 * completed plans to memory (MEMORY_WRITTEN in the task's stream, before the
 * final event). Register it after guards that may still change the stop. It writes
 * nothing in a replay.
 */
export function createMemoryEndGuard(
  memory: MemoryService,
  policy: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY,
) {
  return {
    async beforeEnd(ctx: TaskEndContext): Promise<{ events?: NewEvent[] }> {
      // A replay never writes memory: its task is a re-run of a recorded one, whose summary
      // and plans memory already holds (a write here would insert or reweight an entry).
      if (isReplay(ctx.events)) return {};
      const events: NewEvent[] = [];
      const last = ctx.events[ctx.events.length - 1];
      for (const candidate of decideAtEnd(ctx.events, ctx.stop.stop_reason, ctx.result, policy)) {
        const written = await memoryWrite(
          memory,
          candidate,
          policy,
          ctx.events,
          ctx.events[0]?.session_id ?? null,
          {
            source_event_id: last?.event_id ?? null,
            causation_id: last?.event_id ?? null,
            reinforce_source: 'system',
            metadata: {},
          },
        );
        if (written) events.push(written);
      }
      return { events };
    },
  };
}
