import { z } from 'zod';
import { AgentName } from './directive';
import { AnswerEvaluatorSettings, Role } from './task';
import { ToolBudget } from './tool';

/**
 * Where a remote agent is reached over A2A 1.0: its base URL (the card at
 * `/.well-known/agent-card.json` below it) or its card's own URL; `headers_from`
 * names where the request headers it needs come from (`env:NAME`: a JSON object
 * in that variable; `file:/path`: a JSON object in that file), read at each
 * request and never recorded.
 */
export const RemoteAgentLink = z
  .object({
    url: z.url({ protocol: /^https?$/ }).optional(),
    card_url: z.url({ protocol: /^https?$/ }).optional(),
    headers_from: z
      .string()
      .regex(/^(env:[A-Za-z_][A-Za-z0-9_]*|file:.+)$/, 'env:<VARIABLE> or file:<path>')
      .optional(),
  })
  .strict()
  .refine(
    (l) => (l.url === undefined) !== (l.card_url === undefined),
    'give exactly one of url and card_url',
  );
export type RemoteAgentLink = z.infer<typeof RemoteAgentLink>;

/** The address a remote agent is named by in the log and on the dashboard: its card's URL, or its base URL. */
export const remoteAgentAddress = (link: RemoteAgentLink): string => link.card_url ?? link.url!;

/**
 * A named agent a task may delegate to: what it is for (shown to the
 * orchestrator), the model per role it runs with (the configured one where
 * absent), the tools it may use (null: all) and its instructions. A child task
 * records the profile it started with, so a change of config never changes a
 * running tree or a replay. A remote agent (`a2a`) runs on another service:
 * the delegation is an A2A message to it, and `timeout_ms` bounds how long its
 * task may take (besides the time carved from the parent's budget).
 */
export const AgentProfile = z
  .object({
    name: AgentName,
    description: z.string().max(2000).default(''),
    models: z.partialRecord(Role, z.string().min(1).max(200)).default({}),
    tools: z.array(z.string().min(1).max(200)).max(500).nullable().default(null),
    instructions: z.string().max(20_000).default(''),
    a2a: RemoteAgentLink.optional(),
    timeout_ms: z.number().int().positive().max(86_400_000).optional(),
    /** the agent's final answers are evaluated, and retried once below the threshold (absent: off) */
    evaluator: AnswerEvaluatorSettings.optional(),
    /** per-tool budgets of this agent's tasks, by tool name; each replaces the tool manifest's own */
    tool_budgets: z.record(z.string().min(1).max(200), ToolBudget).optional(),
    /** the round policy for this agent's tasks, whatever RUNLEDGER_ROUND_POLICY says (absent: the process's) */
    round_policy: z.enum(['on', 'off']).optional(),
  })
  .strict()
  .refine((a) => a.a2a !== undefined || a.description !== '', {
    message: 'a description is required (only a remote agent may leave it out)',
    path: ['description'],
  });
export type AgentProfile = z.infer<typeof AgentProfile>;

/** The agent every runtime offers: a coder working in the allowed root with every tool. */
export const BUILT_IN_CODER: AgentProfile = {
  name: 'coder',
  description: 'Writes, changes and runs code in the workspace; give it one self-contained programming task.',
  models: {},
  tools: null,
  instructions:
    'You are the coder agent. Work only on the task you were given, in the workspace; check your work by running it; answer with what you did and its result.',
};

/** What an agent is for, as the orchestrator reads it: its description, or where a remote one is reached. */
export const agentDescription = (a: AgentProfile): string =>
  a.description !== '' ? a.description : `a remote agent (A2A) at ${remoteAgentAddress(a.a2a!)}`;
