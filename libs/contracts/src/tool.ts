import { z } from 'zod';

export const ToolCall = z.object({
  tool: z.string().min(1),
  args: z.record(z.string(), z.unknown()),
  task_id: z.string().min(1),
  step_id: z.string().nullable(),
});
export type ToolCall = z.infer<typeof ToolCall>;

export const ToolResult = z.object({
  tool: z.string(),
  ok: z.boolean(),
  output: z.unknown(),
  error: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()).default({}),
});
export type ToolResult = z.infer<typeof ToolResult>;

/**
 * How often a task may run a tool (the round policy's per-tool budget): at most `max_calls_per_task`
 * times, and, with `only_if_previous_empty`, again only when its previous call found nothing. A call
 * past it is refused before it runs, and the tool is no longer offered.
 */
export const ToolBudget = z
  .object({
    max_calls_per_task: z.number().int().positive().max(10_000).optional(),
    only_if_previous_empty: z.boolean().optional(),
  })
  .strict();
export type ToolBudget = z.infer<typeof ToolBudget>;

/** manifest.json of a tool plugin folder. */
export const ToolManifest = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/),
    description: z.string().min(1).max(2000),
    args_schema: z.record(z.string(), z.unknown()),
    requires_permission: z.boolean().default(false),
    idempotent: z.boolean().default(false),
    timeout_ms: z.number().int().positive().max(3_600_000).default(30_000),
    secrets: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/)).default([]),
    sensitive_output: z.boolean().default(false),
    entry: z.string().default('index.js'),
    /** the tool only reads (an MCP tool's readOnlyHint): `mcp_allow_read_only` lets such tools run without asking */
    read_only: z.boolean().optional(),
    /** per-tool budget: the most calls one task may run (absent: no limit of its own) */
    max_calls_per_task: ToolBudget.shape.max_calls_per_task,
    /** per-tool budget: a second call runs only when the previous one found nothing */
    only_if_previous_empty: ToolBudget.shape.only_if_previous_empty,
  })
  .strict();
export type ToolManifest = z.infer<typeof ToolManifest>;
