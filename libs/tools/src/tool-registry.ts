import { ToolManifest, ToolResult } from '@runledger/contracts';

/** What a tool gets besides its validated args. */
export interface ToolExecutionContext {
  task_id: string;
  session_id: string;
  step_id: string | null;
  call_id: string;
  /** aborted on timeout or cancellation; a tool must stop promptly */
  signal: AbortSignal;
  /** secrets resolved for this call only (name -> value); never persisted */
  secrets: ReadonlyMap<string, string>;
}

export interface RegisteredTool {
  readonly manifest: ToolManifest;
  run(args: Record<string, unknown>, ctx: ToolExecutionContext): Promise<ToolResult>;
}

export type ArgsValidation = { ok: true } | { ok: false; error: string };

/**
 * The tools the runtime may call. Port; the tools lib provides the plugin-backed
 * registry and an in-memory one for tests.
 */
export abstract class ToolRegistry {
  abstract list(): ToolManifest[];
  abstract get(name: string): RegisteredTool | undefined;
  /** args against the manifest's args_schema; never throws */
  abstract validateArgs(name: string, args: Record<string, unknown>): ArgsValidation;
}
