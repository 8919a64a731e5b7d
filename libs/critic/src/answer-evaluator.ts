import { AnswerScore } from '@runledger/contracts';
import { CriticExchange } from './critic';
import { CriticMessage, CriticModel, askJudge, parseJudgeReply } from './model-critic';

/** What the evaluator judges: the task as asked and the answer the model gave. */
export interface AnswerEvaluationInput {
  task: string;
  answer: string;
  /** what a good answer must do besides answering the task ('' for nothing more) */
  criteria: string;
}

export interface AnswerVerdict {
  /** null when the evaluation failed: the score is absent, never guessed */
  score: AnswerScore | null;
  error: string | null;
  exchange: CriticExchange;
}

export const EVALUATOR_SYSTEM_PROMPT = [
  'You are the answer evaluator of Runledger. Judge whether the answer below does what the task asks:',
  'correct, complete, and nothing but what was asked. Reply with ONE JSON object only:',
  '{"score":0..1,"feedback":"<what is wrong or missing, addressed to whoever answers again; empty when nothing is>"}',
].join('\n');

const MAX_CHARS = 8000;
const clip = (text: string) => (text.length > MAX_CHARS ? `${text.slice(0, MAX_CHARS)}…[truncated]` : text);

export function evaluatorPrompt(input: AnswerEvaluationInput): CriticMessage[] {
  return [
    {
      role: 'system',
      content: input.criteria
        ? `${EVALUATOR_SYSTEM_PROMPT}\nA good answer also meets these criteria:\n${input.criteria}`
        : EVALUATOR_SYSTEM_PROMPT,
    },
    { role: 'user', content: `task:\n${clip(input.task)}\n\nanswer:\n${clip(input.answer)}` },
  ];
}

/**
 * Scores a final answer with the critic role's model, through the same call as the critic (askJudge):
 * never throws; a failed call or a reply that is not an AnswerScore is a verdict with an error.
 */
export class ModelAnswerEvaluator {
  constructor(
    private readonly model: CriticModel,
    private readonly timeoutMs: number,
  ) {}

  async evaluate(input: AnswerEvaluationInput, signal?: AbortSignal): Promise<AnswerVerdict> {
    const reply = await askJudge(this.model, evaluatorPrompt(input), this.timeoutMs, 'evaluator', signal);
    if (reply.content === null) return { score: null, error: reply.error, exchange: reply.exchange };
    const parsed = parseJudgeReply(reply.content, AnswerScore, 'evaluator', 'an AnswerScore');
    return 'value' in parsed
      ? { score: parsed.value, error: null, exchange: reply.exchange }
      : { score: null, error: parsed.error, exchange: reply.exchange };
  }
}
