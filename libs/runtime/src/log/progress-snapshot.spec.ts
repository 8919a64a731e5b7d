import { RuntimeEvent } from '@runledger/contracts';
import { taskReceivedPayload } from '../discipline/testing-events';
import { evolveProgress, foldProgress } from './progress';
import { progressFromSnapshot, progressSnapshot } from './progress-snapshot';

let seq = 0;
const event = (type: string, payload: unknown): RuntimeEvent =>
  ({
    event_id: `evt_${++seq}`,
    task_id: 't',
    session_id: 's',
    sequence: seq,
    position: seq,
    type,
    payload,
    causation_id: null,
    correlation_id: 't',
    created_at: new Date(0).toISOString(),
  }) as RuntimeEvent;

const called = (callId: string) =>
  event('MODEL_CALLED', {
    call_id: callId,
    role: 'orchestrator',
    model: 'm',
    backend: 'responses',
    attempt: 1,
    round: 1,
    prompt_chars: 10,
  });
const responded = (callId: string, responseId: string) =>
  event('MODEL_RESPONDED', {
    call_id: callId,
    role: 'orchestrator',
    model: 'm',
    content: '{"type":"respond","content":"x"}',
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    latency_ms: 1,
    error: null,
    finish_reason: 'stop',
    retry_after_ms: null,
    continuation: {
      response_id: responseId,
      items_hash: `hash_${responseId}`,
      item_count: 2,
      previous_response_id: null,
      sent_items: 2,
      stateless_reason: 'missing',
      detail: null,
    },
  });

describe('progress snapshots', () => {
  it("keep every map of the fold: a checkpoint's progress folds on as the log's own fold does", () => {
    seq = 0;
    const log = [
      event('TASK_RECEIVED', taskReceivedPayload('x', { session_id: 's' })),
      called('c1'),
      responded('c1', 'resp_1'),
    ];
    const folded = foldProgress('t', log);
    expect(folded.continuations.size).toBe(1);

    const restored = progressFromSnapshot(JSON.parse(JSON.stringify(progressSnapshot(folded))));
    expect(restored).not.toBeNull();
    expect(restored!.modelCallConversations).toEqual(folded.modelCallConversations);
    expect(restored!.continuations).toEqual(folded.continuations);

    const next = [called('c2'), responded('c2', 'resp_2')];
    const fromSnapshot = next.reduce(evolveProgress, restored!);
    const fromLog = foldProgress('t', [...log, ...next]);
    expect(fromSnapshot.continuations).toEqual(fromLog.continuations);
    expect(progressSnapshot(fromSnapshot)).toEqual(progressSnapshot(fromLog));
  });

  it("keep the answer evaluator's verdicts, so a resumed task neither evaluates an answer twice nor retries twice", () => {
    seq = 0;
    const log = [
      event('TASK_RECEIVED', taskReceivedPayload('x', { session_id: 's' })),
      event('ANSWER_EVALUATED', {
        round: 1,
        attempt: 1,
        call_id: 'mc_1',
        score: 0.2,
        feedback: 'wrong',
        threshold: 0.7,
        passed: false,
        error: null,
        retry: true,
        tokens: 150,
      }),
    ];
    const folded = foldProgress('t', log);
    const restored = progressFromSnapshot(JSON.parse(JSON.stringify(progressSnapshot(folded))));
    expect(restored!.evaluation).toEqual({ attempts: 1, retried: true, tokens: 150, round: 1 });
    // a snapshot taken before verdicts were kept: none so far
    const { evaluation: _none, ...older } = progressSnapshot(foldProgress('t', log.slice(0, 1)));
    expect(progressFromSnapshot(JSON.parse(JSON.stringify(older)))!.evaluation).toEqual({
      attempts: 0,
      retried: false,
      tokens: 0,
      round: null,
    });
  });
});
