import type { MemoryToolService } from './memory-tool-service';
import { parsePluginDirs, type ToolLogger } from './discovery';
import { PluginToolRegistry } from './plugin-tool-registry';
import { ToolSandbox, type SandboxMode } from './sandbox';

export interface ToolLayerOptions {
  allowedRoot: string;
  /** RUNLEDGER_SANDBOX */
  sandbox?: SandboxMode;
  /** RUNLEDGER_PLUGINS (`:`-separated) or a list of folders */
  plugins?: string | readonly string[];
  /** RUNLEDGER_TOOL_OUTPUT_MAX_BYTES */
  maxOutputBytes?: number;
  memory?: MemoryToolService | null;
  logger?: ToolLogger;
}

/** `msg (key: value, ...)` from the object's plain fields; nested ones (the sandbox status) the message already says. */
function noticeLine(obj: object, msg: string): string {
  const fields = Object.entries(obj)
    .filter(([, v]) => ['string', 'number', 'boolean'].includes(typeof v))
    .map(([k, v]) => `${k}: ${String(v).replace(/\s+/g, ' ')}`);
  return `runledger: ${msg}${fields.length ? ` (${fields.join(', ')})` : ''}`;
}

/**
 * One plain line on stderr per notice. Not process.emitWarning: that prints as a Node warning with
 * the process id and a `--trace-warnings` hint, which reads like a crash to a user (and to tests).
 */
export function stderrToolLogger(stderr: { write(text: string): unknown } = process.stderr): ToolLogger {
  return { warn: (obj, msg) => void stderr.write(`${noticeLine(obj, msg)}\n`) };
}

/** The composition root's one call: sandbox + plugin registry (built-ins and RUNLEDGER_PLUGINS). */
export function createToolLayer(options: ToolLayerOptions): {
  registry: PluginToolRegistry;
  sandbox: ToolSandbox;
} {
  // Without a logger the boot warnings (sandbox fallback, skipped plugins) still reach stderr.
  const logger = options.logger ?? stderrToolLogger();
  const sandbox = new ToolSandbox({
    allowedRoot: options.allowedRoot,
    mode: options.sandbox ?? 'auto',
    maxOutputBytes: options.maxOutputBytes,
    logger,
  });
  const pluginDirs =
    typeof options.plugins === 'string' || options.plugins === undefined
      ? parsePluginDirs(options.plugins)
      : options.plugins;
  const registry = PluginToolRegistry.load({
    services: { sandbox, memory: options.memory ?? null },
    pluginDirs,
    logger,
  });
  return { registry, sandbox };
}
