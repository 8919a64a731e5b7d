import { z } from 'zod';
import { AgentName } from './directive';
import { Role } from './task';

/**
 * A named agent a task may delegate to: what it is for (shown to the
 * orchestrator), the model per role it runs with (the configured one where
 * absent), the tools it may use (null: all) and its instructions. A child task
 * records the profile it started with, so a change of config never changes a
 * running tree or a replay.
 */
export const AgentProfile = z
  .object({
    name: AgentName,
    description: z.string().min(1).max(2000),
    models: z.partialRecord(Role, z.string().min(1).max(200)).default({}),
    tools: z.array(z.string().min(1).max(200)).max(500).nullable().default(null),
    instructions: z.string().max(20_000).default(''),
  })
  .strict();
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
