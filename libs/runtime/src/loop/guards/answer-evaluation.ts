import { AnswerEvaluatorSettings, NewEvent, PriceTable } from '@runledger/contracts';
import { ModelAnswerEvaluator, exchangeEvents } from '@runledger/critic';
import { ModelBackend } from '../../model/model-backend';
import { criticModelOf } from '../../model/critic-model';
import { TaskProgress, modelCallKey } from '../../log/progress';
import { TaskWriter } from '../../log/task-writer';
import { priceModelCalls } from '../../discipline/budgets';

/**
 * Which evaluator a task's answers get: a delegated agent's its profile's, the orchestrator's own
 * tasks the one their settings recorded; null: none (the default).
 */
export const evaluatorSettingsOf = (p: TaskProgress): AnswerEvaluatorSettings | null =>
  (p.agent ? p.agent.evaluator : p.settings?.answer_evaluator) ?? null;

/** What the model is shown when its answer is asked for again. */
export const retryNote = (score: number, threshold: number, feedback: string): string =>
  `the answer evaluator scored your answer ${score} (below ${threshold}): ${feedback || 'no reason given'}. Answer the task again, addressing this; this is the only retry.`;

/**
 * Evaluate, then retry once: the critic role's model scores a final answer before the task ends
 * (ANSWER_EVALUATED, its model call recorded and priced as the critic's are). Below the threshold,
 * and only the first time, the round closes with the evaluation as feedback (GUARD_TRIGGERED
 * answer_retry) and the model answers again; any other verdict, a failed evaluation or a spent
 * evaluator budget lets the task end with the answer it has. Everything it decides is in the log,
 * so a resumed task never evaluates an answer twice and a replay answers the call from the recording.
 */
export class AnswerEvaluation {
  constructor(
    private readonly model: ModelBackend,
    private readonly prices: PriceTable = {},
  ) {}

  /** 'retry': the model answers again; 'end': the task ends with `answer` */
  async judge(writer: TaskWriter, answer: string, signal: AbortSignal): Promise<'retry' | 'end'> {
    const p = writer.progress;
    const settings = evaluatorSettingsOf(p);
    // evaluated already (a restart between the verdict and the end): the verdict stands
    if (!settings || p.evaluation.round === p.round) return 'end';
    const base = {
      round: p.round,
      attempt: p.evaluation.attempts + 1,
      threshold: settings.threshold,
      feedback: '',
      retry: false,
    };
    const unscored = (error: string): NewEvent => ({
      type: 'ANSWER_EVALUATED',
      payload: { ...base, call_id: null, score: null, passed: null, error, tokens: 0 },
    });
    if (p.evaluation.tokens >= settings.max_tokens) {
      await writer.append([
        unscored(
          `the evaluator's budget of ${settings.max_tokens} tokens is spent (${p.evaluation.tokens} used)`,
        ),
      ]);
      return 'end';
    }
    // which critic answer of a recording this is: every critic call of the task before it (the critic's included)
    const cursor = p.modelCalls[modelCallKey(this.model.backend, 'critic')] ?? 0;
    const critic = criticModelOf(this.model, { cursor });
    if (!critic) {
      await writer.append([unscored('no model serves the critic role, which evaluates answers')]);
      return 'end';
    }
    const verdict = await new ModelAnswerEvaluator(critic, settings.timeout_ms).evaluate(
      { task: p.input, answer, criteria: settings.criteria },
      signal,
    );
    // cancelled or out of time meanwhile: the loop ends the task for that, with nothing of this call
    if (signal.aborted) return 'end';
    const score = verdict.score;
    const passed = score ? score.score >= settings.threshold : null;
    const retry = passed === false && !p.evaluation.retried;
    const events: NewEvent[] = [
      ...exchangeEvents(verdict.exchange, null),
      {
        type: 'ANSWER_EVALUATED',
        payload: {
          ...base,
          call_id: verdict.exchange.call_id,
          score: score?.score ?? null,
          feedback: score?.feedback ?? '',
          passed,
          error: verdict.error,
          retry,
          tokens: verdict.exchange.usage.total_tokens,
        },
      },
      ...(retry && score
        ? [
            {
              type: 'GUARD_TRIGGERED' as const,
              payload: {
                guard: 'answer_retry' as const,
                round: p.round,
                detail: retryNote(score.score, settings.threshold, score.feedback),
                data: { score: score.score, threshold: settings.threshold },
              },
            },
          ]
        : []),
    ];
    await writer.append(priceModelCalls(events, this.prices));
    return retry ? 'retry' : 'end';
  }
}
