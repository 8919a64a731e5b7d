import { ToolManifest, ToolResult } from '@runledger/contracts';
import { redactSecrets } from './redact';
import type { ElicitationAnswer } from './mcp/elicitation';

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
  /**
   * The logged answer to the `index`-th question (1, 2, ...) the tool's server asks the user during
   * this call, undefined while there is none (the tool then throws ToolInputRequired). Absent: the
   * caller cannot ask anyone, and every question is declined.
   */
  elicitationAnswer?: (index: number) => ElicitationAnswer | undefined;
}

export interface RegisteredTool {
  readonly manifest: ToolManifest;
  run(args: Record<string, unknown>, ctx: ToolExecutionContext): Promise<ToolResult>;
}

export type ArgsValidation = { ok: true } | { ok: false; error: string };

/**
 * Why an invoke did not succeed, in `metadata.error_kind` of the result, so the runtime can pick
 * the TOOL_FAILED error_kind without reading messages.
 */
export type ToolErrorKind = 'unknown_tool' | 'validation_error' | 'timeout' | 'cancelled' | 'tool_error';

/**
 * The tools the runtime may call. Port; the tools lib provides the plugin-backed
 * registry (PluginToolRegistry), which also serves as the in-memory one for tests.
 */
export abstract class ToolRegistry {
  abstract list(): ToolManifest[];
  abstract get(name: string): RegisteredTool | undefined;
  /** args against the manifest's args_schema; never throws */
  abstract validateArgs(name: string, args: Record<string, unknown>): ArgsValidation;

  /**
   * The one call the runtime makes: validate args, run with the manifest's timeout and
   * `ctx.signal`, turn a throw into `ok:false`, and redact every secret of `ctx.secrets` from the
   * result. Never throws.
   */
  async invoke(name: string, args: Record<string, unknown>, ctx: ToolExecutionContext): Promise<ToolResult> {
    const secrets = [...ctx.secrets.values()];
    const started = Date.now();
    const fail = (kind: ToolErrorKind, error: string, metadata: Record<string, unknown> = {}): ToolResult =>
      redactSecrets(
        {
          tool: name,
          ok: false,
          output: null,
          error,
          metadata: { ...metadata, error_kind: kind, duration_ms: Date.now() - started },
        },
        secrets,
      );

    const tool = this.get(name);
    if (!tool) return fail('unknown_tool', `unknown tool ${JSON.stringify(name)}`);
    const valid = this.validateArgs(name, args);
    if (!valid.ok) return fail('validation_error', valid.error);
    if (ctx.signal.aborted) return fail('cancelled', 'cancelled before start');

    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error(`timeout after ${tool.manifest.timeout_ms} ms`));
    }, tool.manifest.timeout_ms);
    const onOuterAbort = () => controller.abort(ctx.signal.reason ?? new Error('cancelled'));
    ctx.signal.addEventListener('abort', onOuterAbort, { once: true });
    // A tool that ignores its signal must not hold the caller: the abort settles the call.
    const aborted = new Promise<'aborted'>((resolve) =>
      controller.signal.addEventListener('abort', () => resolve('aborted'), { once: true }),
    );
    try {
      const outcome = await Promise.race([tool.run(args, { ...ctx, signal: controller.signal }), aborted]);
      if (outcome === 'aborted') {
        return timedOut
          ? fail('timeout', `${name} timed out after ${tool.manifest.timeout_ms} ms`, { timed_out: true })
          : fail('cancelled', `${name} cancelled`);
      }
      const result: ToolResult = {
        ...outcome,
        tool: name,
        metadata: { ...outcome.metadata, duration_ms: Date.now() - started },
      };
      if (!result.ok && result.metadata.error_kind === undefined)
        result.metadata.error_kind = timedOut ? 'timeout' : 'tool_error';
      return redactSecrets(result, secrets);
    } catch (e) {
      if (timedOut)
        return fail('timeout', `${name} timed out after ${tool.manifest.timeout_ms} ms`, { timed_out: true });
      return fail('tool_error', e instanceof Error ? e.message : String(e));
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onOuterAbort);
    }
  }
}
