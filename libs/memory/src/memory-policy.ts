import { CriticScore, RuntimeEvent, StopReason } from '@runledger/contracts';
import {
  DEFAULT_MEMORY_POLICY,
  InsertDecision,
  MemoryDecision,
  MemoryPolicyConfig,
  NearestEntry,
  NoWrite,
  OutcomeTool,
  ToolOutcomeEvent,
  decide,
  decideAtEnd,
  dedupe,
} from './memory-write-policy';

/** The memory write policy with its configured thresholds, injectable; the decisions are the pure functions beside it. */
export class MemoryPolicy {
  constructor(readonly config: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY) {}

  decide(event: ToolOutcomeEvent, tool: OutcomeTool, score: CriticScore | null): NoWrite | InsertDecision {
    return decide(event, tool, score, this.config);
  }

  dedupe(candidate: InsertDecision, nearest: NearestEntry | null): MemoryDecision {
    return dedupe(candidate, nearest, this.config);
  }

  decideAtEnd(
    events: readonly RuntimeEvent[],
    stopReason: StopReason,
    result: string | null,
  ): InsertDecision[] {
    return decideAtEnd(events, stopReason, result, this.config);
  }
}
