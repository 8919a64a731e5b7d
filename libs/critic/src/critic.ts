import { CriticScore, NewEvent, PendingToolOutcome, TokenUsage, newId } from '@runledger/contracts';

/** What the critic judges: one tool outcome, as the log recorded it. */
export interface CriticInput {
  /** the TOOL_COMPLETED / TOOL_FAILED event scored */
  target_event_id: string;
  call_id: string;
  tool: string;
  ok: boolean;
  output: unknown;
  error: string | null;
  metadata: Record<string, unknown>;
}

/** The tool outcome events a critic scores (scored before they are stored, to commit with the verdict). */
export type CriticTarget = PendingToolOutcome;

/** What the critic is shown of a recorded tool outcome (the live hook and a replay build it the same way). */
export function criticInputOf(event: CriticTarget): CriticInput {
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

/** A model call the critic made, so the hook can record it (MODEL_CALLED / MODEL_RESPONDED) for replay. */
export interface CriticExchange {
  call_id: string;
  model: string;
  backend: string;
  prompt_chars: number;
  content: string | null;
  usage: TokenUsage;
  latency_ms: number;
  error: { kind: string; message: string } | null;
}

export interface CriticVerdict {
  critic: 'model' | 'heuristic';
  /** null when the critic failed: the score is absent, never guessed */
  score: CriticScore | null;
  error: string | null;
  exchange: CriticExchange | null;
}

/** Scores tool outcomes. Port; adapters: ModelCritic (the critic role), HeuristicCritic (no model). */
export abstract class Critic {
  abstract readonly kind: 'model' | 'heuristic';
  /** never throws: a failure is a verdict with `error` and a null score */
  abstract evaluate(input: CriticInput, signal?: AbortSignal): Promise<CriticVerdict>;
}

/** A judge's model call as the log records it: MODEL_CALLED and MODEL_RESPONDED of the critic role. */
export function exchangeEvents(x: CriticExchange, causationId: string | null): NewEvent[] {
  return [
    {
      type: 'MODEL_CALLED',
      causation_id: causationId,
      payload: {
        call_id: x.call_id,
        role: 'critic',
        model: x.model,
        backend: x.backend,
        attempt: 1,
        round: null,
        prompt_chars: x.prompt_chars,
      },
    },
    {
      type: 'MODEL_RESPONDED',
      causation_id: causationId,
      payload: {
        call_id: x.call_id,
        role: 'critic',
        model: x.model,
        content: x.content,
        usage: x.usage,
        latency_ms: x.latency_ms,
        error: x.error,
        finish_reason: null,
        retry_after_ms: null,
      },
    },
  ];
}

/**
 * The events that record a verdict: the critic's model call (when it made one),
 * then CRITIC_RESULT. `criticEventId` lets a later event name the result as its cause.
 */
export function criticEvents(
  input: CriticInput,
  verdict: CriticVerdict,
  criticEventId: string = newId('evt'),
): NewEvent[] {
  const events: NewEvent[] = verdict.exchange ? exchangeEvents(verdict.exchange, input.target_event_id) : [];
  events.push({
    type: 'CRITIC_RESULT',
    event_id: criticEventId,
    causation_id: input.target_event_id,
    payload: {
      target_event_id: input.target_event_id,
      call_id: input.call_id,
      critic: verdict.critic,
      score: verdict.score,
      error: verdict.error,
    },
  });
  return events;
}
