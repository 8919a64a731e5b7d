import { z } from 'zod';
import {
  AgentProfile,
  RuntimeEvent,
  RuntimeEventEnvelope,
  ToolManifest,
  ValidationError,
  parseEventBody,
  upcastEvent,
} from '@runledger/contracts';

/** The format version a bundle is written in; a reader refuses a newer one instead of misreading it. */
export const BUNDLE_VERSION = 1;

/**
 * What the recording process offered a task beyond what TASK_RECEIVED.settings records: its tools
 * (MCP servers' included) and agents shape every prompt, the rest how a plan and a delegation run.
 * A replay elsewhere runs under these instead of its own configuration.
 */
export const BundleRuntime = z
  .object({
    tools: z.array(ToolManifest),
    agents: z.array(AgentProfile),
    max_delegation_depth: z.number().int().nonnegative(),
    step_concurrency: z.number().int().positive(),
    model_timeout_ms: z.number().int().positive().nullable(),
    coder_tool_turns: z.number().int().positive(),
    /** the round cap of a task recorded without settings (older logs) */
    max_rounds: z.number().int().positive(),
  })
  .strict();
export type BundleRuntime = z.infer<typeof BundleRuntime>;

/** How a task of the tree ended, as its final event says (null: it had not ended when bundled). */
export const BundleOutput = z
  .object({
    task_id: z.string(),
    status: z.enum(['completed', 'failed', 'cancelled']).nullable(),
    stop_reason: z.string().nullable(),
    result: z.string().nullable(),
  })
  .strict();
export type BundleOutput = z.infer<typeof BundleOutput>;

/** What was taken out before the bundle was written (the values themselves never are in it). */
export const BundleScrub = z
  .object({
    /** distinct secret values hidden: provided in the sessions, known to the process, given on the command line */
    secrets: z.number().int().nonnegative(),
    /** the patterns every string was searched with */
    patterns: z.array(z.string()),
    /** how many matches were masked (each the length of what it hides) */
    masked: z.number().int().nonnegative(),
    /** SECRET_PROVIDED fingerprints dropped */
    fingerprints: z.number().int().nonnegative(),
  })
  .strict();
export type BundleScrub = z.infer<typeof BundleScrub>;

const BundleTask = z
  .object({
    task_id: z.string(),
    parent_task_id: z.string().nullable(),
    events: z.array(z.unknown()).min(1),
  })
  .strict();

export const IncidentBundleFile = z
  .object({
    runledger_bundle: z.number().int().positive(),
    created_at: z.string(),
    /** the task it was written for; the tree below it follows in `tasks`, parents first */
    task_id: z.string(),
    tasks: z.array(BundleTask).min(1),
    runtime: BundleRuntime,
    outputs: z.array(BundleOutput),
    scrubbed: BundleScrub,
  })
  .strict();

/** A bundle as read: every task's events checked against today's catalogue (upcast from their schema_version). */
export interface IncidentBundle extends Omit<z.infer<typeof IncidentBundleFile>, 'tasks'> {
  tasks: Array<{ task_id: string; parent_task_id: string | null; events: RuntimeEvent[] }>;
}

/** One task's events as the bundle states them: each a whole envelope, in sequence, of that task. */
function bundledEvents(taskId: string, raw: readonly unknown[]): RuntimeEvent[] {
  return raw.map((value, i) => {
    const envelope = RuntimeEventEnvelope.safeParse(value);
    if (!envelope.success)
      throw new ValidationError(
        `bundle: task ${taskId} event ${i + 1}: ${envelope.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`,
      );
    const e = upcastEvent(envelope.data);
    if (e.task_id !== taskId || e.sequence !== i + 1)
      throw new ValidationError(
        `bundle: task ${taskId} event ${i + 1} is ${e.task_id} sequence ${e.sequence}; a task's events run 1, 2, 3 ... in its own list`,
      );
    try {
      return { ...e, payload: parseEventBody(e).payload } as RuntimeEvent;
    } catch (err) {
      throw new ValidationError(`bundle: task ${taskId} event ${i + 1}: ${(err as Error).message}`);
    }
  });
}

/** The text of a bundle file, parsed and checked; ValidationError saying what is wrong. */
export function parseBundle(text: string): IncidentBundle {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(`bundle: not JSON (${(e as Error).message})`);
  }
  const version = (json as { runledger_bundle?: unknown } | null)?.runledger_bundle;
  if (typeof version !== 'number')
    throw new ValidationError('bundle: not a Runledger incident bundle (no runledger_bundle version)');
  if (version > BUNDLE_VERSION)
    throw new ValidationError(
      `bundle: format ${version} is newer than this runledger reads (${BUNDLE_VERSION}); use a newer runledger`,
    );
  const parsed = IncidentBundleFile.safeParse(json);
  if (!parsed.success)
    throw new ValidationError(
      `bundle: ${parsed.error.issues.map((x) => `${x.path.join('.') || '(root)'}: ${x.message}`).join('; ')}`,
    );
  const b = parsed.data;
  if (b.tasks[0].task_id !== b.task_id)
    throw new ValidationError(
      `bundle: its first task is ${b.tasks[0].task_id}, not the bundled ${b.task_id}`,
    );
  const tasks = b.tasks.map((t) => ({ ...t, events: bundledEvents(t.task_id, t.events) }));
  for (const t of tasks)
    if (t.events[0].type !== 'TASK_RECEIVED')
      throw new ValidationError(`bundle: task ${t.task_id} does not start with TASK_RECEIVED`);
  return { ...b, tasks };
}
