import { CriticScore, RuntimeEvent, StopReason } from '@runledger/contracts';
import * as writePolicy from './memory-write-policy';

/** The memory write policy with its configured thresholds, injectable; the decisions are the pure functions beside it. */
export class MemoryPolicy {
  constructor(readonly config: writePolicy.MemoryPolicyConfig = writePolicy.DEFAULT_MEMORY_POLICY) {}

  decide(
    event: writePolicy.ToolOutcomeEvent,
    tool: writePolicy.OutcomeTool,
    score: CriticScore | null,
  ): writePolicy.NoWrite | writePolicy.InsertDecision {
    return writePolicy.decide(event, tool, score, this.config);
  }

  dedupe(
    candidate: writePolicy.InsertDecision,
    nearest: writePolicy.NearestEntry | null,
  ): writePolicy.MemoryDecision {
    return writePolicy.dedupe(candidate, nearest, this.config);
  }

  decideAtEnd(
    events: readonly RuntimeEvent[],
    stopReason: StopReason,
    result: string | null,
  ): writePolicy.InsertDecision[] {
    return writePolicy.decideAtEnd(events, stopReason, result, this.config);
  }
}
