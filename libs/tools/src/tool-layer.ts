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

const stderrLogger: ToolLogger = {
  warn: (obj, msg) => process.emitWarning(`${msg} ${JSON.stringify(obj)}`, 'Runledger'),
};

/** The composition root's one call: sandbox + plugin registry (built-ins and RUNLEDGER_PLUGINS). */
export function createToolLayer(options: ToolLayerOptions): {
  registry: PluginToolRegistry;
  sandbox: ToolSandbox;
} {
  // Without a logger the boot warnings (sandbox fallback, skipped plugins) still reach stderr.
  const logger = options.logger ?? stderrLogger;
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
