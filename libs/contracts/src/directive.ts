import { z } from 'zod';

export const STEP_KINDS = ['tool', 'coder', 'memory', 'respond'] as const;

const JsonArgs = z.record(z.string(), z.unknown());

export const PlanStep = z
  .object({
    id: z.string().min(1).max(100),
    kind: z.enum(STEP_KINDS),
    tool: z.string().min(1).max(200).nullable().default(null),
    args: JsonArgs.default({}),
    description: z.string().max(2000).default(''),
    requires_confirmation: z.boolean().default(false),
    depends_on: z.array(z.string().min(1).max(100)).default([]),
  })
  .strict();
export type PlanStep = z.infer<typeof PlanStep>;

export const PlanDirective = z
  .object({ type: z.literal('plan'), steps: z.array(PlanStep).min(1).max(50) })
  .strict();
export const ToolDirective = z
  .object({ type: z.literal('tool'), tool: z.string().min(1).max(200), args: JsonArgs.default({}) })
  .strict();
export const RespondDirective = z.object({ type: z.literal('respond'), content: z.string() }).strict();
export const FailDirective = z.object({ type: z.literal('fail'), reason: z.string().min(1) }).strict();

export const ExecutionDirective = z.discriminatedUnion('type', [
  PlanDirective,
  ToolDirective,
  RespondDirective,
  FailDirective,
]);
export type ExecutionDirective = z.infer<typeof ExecutionDirective>;
export type PlanDirective = z.infer<typeof PlanDirective>;
export type ToolDirective = z.infer<typeof ToolDirective>;

/**
 * One native tool call as the model sent it (OpenAI `tool_calls`): the id the
 * `tool` message answers, the function name and its arguments exactly as the
 * model wrote them (a JSON string, possibly invalid), so replay reproduces them.
 */
export const ModelToolCall = z
  .object({ id: z.string().min(1).max(200), name: z.string().min(1).max(200), arguments: z.string() })
  .strict();
export type ModelToolCall = z.infer<typeof ModelToolCall>;
