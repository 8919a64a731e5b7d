import { CriticScore } from '@runledger/contracts';
import { MemoryPolicy } from './memory-policy';
import { DEFAULT_MEMORY_POLICY, InsertDecision, ToolOutcomeEvent } from './memory-write-policy';

const outcome = {
  type: 'TOOL_COMPLETED',
  payload: {
    call_id: 'call_1',
    tool: 'echo',
    result: { tool: 'echo', ok: true, output: 'the sky is blue', error: null, metadata: {} },
  },
} as unknown as ToolOutcomeEvent;
const score: CriticScore = {
  correctness: 0.9,
  usefulness: 0.9,
  safety: 1,
  memory_store: true,
  weight: 0.3,
  notes: '',
};
const tool = { name: 'echo', sensitive_output: false, secrets: [] };

describe('MemoryPolicy', () => {
  it('decides with its configured thresholds', () => {
    expect(new MemoryPolicy().decide(outcome, tool, score)).toMatchObject({ op: 'insert', weight: 0.3 });
    expect(
      new MemoryPolicy({ ...DEFAULT_MEMORY_POLICY, min_weight: 0.5 }).decide(outcome, tool, score),
    ).toMatchObject({
      op: 'none',
    });
  });

  it('reinforces a near duplicate from its own dedup threshold', () => {
    const candidate: InsertDecision = {
      op: 'insert',
      kind: 'tool_result',
      source: 'tool',
      weight: 0.4,
      text: 't',
      reason: 'r',
    };
    const nearest = {
      entry_id: 'mem_1',
      kind: 'tool_result' as const,
      weight: 0.4,
      similarity: 0.9,
      committed: true,
    };
    expect(new MemoryPolicy().dedupe(candidate, nearest)).toEqual(candidate);
    expect(
      new MemoryPolicy({ ...DEFAULT_MEMORY_POLICY, dedup_threshold: 0.85 }).dedupe(candidate, nearest),
    ).toMatchObject({
      op: 'reinforce',
    });
  });
});
