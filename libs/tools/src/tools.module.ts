import { DynamicModule, Module } from '@nestjs/common';
import { ModuleAsyncOptions, forRootAsyncModule } from '@runledger/contracts';
import type { MemoryToolService } from './memory-tool-service';
import { parsePluginDirs, type ToolLogger } from './discovery';
import { PluginToolRegistry } from './plugin-tool-registry';
import { ToolSandbox, type SandboxMode } from './sandbox';
import { ToolRegistry } from './tool-registry';
import { stderrToolLogger } from './stderr-tool-logger';
import { McpClientManager } from './mcp/mcp-client-manager';
import type { McpServerConfig } from './mcp/mcp-config';
import { McpToolRegistry } from './mcp/mcp-tool-registry';

export interface ToolsOptions {
  allowedRoot: string;
  /** RUNLEDGER_SANDBOX */
  sandbox?: SandboxMode;
  /** appended to the one warning about running without the OS sandbox (see ToolSandboxOptions.fallbackNotice) */
  sandboxNotice?: string;
  /** RUNLEDGER_PLUGINS (`:`-separated) or a list of folders */
  plugins?: string | readonly string[];
  /** RUNLEDGER_TOOL_OUTPUT_MAX_BYTES */
  maxOutputBytes?: number;
  /** what the memory_* tools call; null when memory is off */
  memory?: MemoryToolService | null;
  logger?: ToolLogger;
  /** RUNLEDGER_MCP_SERVERS, where their binaries are stored, and the environment env_from reads */
  mcp?: {
    servers: readonly McpServerConfig[];
    blobDir: string;
    /** never visible to a stdio server: the service's data folder */
    privateFolders?: readonly string[];
    env: NodeJS.ProcessEnv;
  };
}

const TOOLS_OPTIONS = Symbol('TOOLS_OPTIONS');

// Without a logger the boot warnings (sandbox fallback, skipped plugins) still reach stderr.
const loggerOf = (o: ToolsOptions): ToolLogger => o.logger ?? stderrToolLogger();

/**
 * ToolSandbox and the ToolRegistry (built-in tools, then the plugins of
 * RUNLEDGER_PLUGINS, discovered from their manifest.json) under their class tokens.
 */
@Module({})
export class ToolsModule {
  static forRootAsync(options: ModuleAsyncOptions<ToolsOptions>): DynamicModule {
    return forRootAsyncModule(ToolsModule, options, {
      provide: TOOLS_OPTIONS,
      providers: [
        {
          provide: ToolSandbox,
          useFactory: (o: ToolsOptions) =>
            new ToolSandbox({
              allowedRoot: o.allowedRoot,
              mode: o.sandbox ?? 'auto',
              maxOutputBytes: o.maxOutputBytes,
              fallbackNotice: o.sandboxNotice,
              logger: loggerOf(o),
            }),
          inject: [TOOLS_OPTIONS],
        },
        {
          provide: McpClientManager,
          // started before the registry is handed out: the first round already sees the servers' tools
          useFactory: async (o: ToolsOptions, sandbox: ToolSandbox) => {
            const manager = new McpClientManager({
              servers: o.mcp?.servers ?? [],
              blobDir: o.mcp?.blobDir ?? '',
              privateFolders: o.mcp?.privateFolders,
              env: o.mcp?.env ?? {},
              sandbox,
              logger: loggerOf(o),
            });
            await manager.start();
            return manager;
          },
          inject: [TOOLS_OPTIONS, ToolSandbox],
        },
        {
          provide: ToolRegistry,
          useFactory: (o: ToolsOptions, sandbox: ToolSandbox, mcp: McpClientManager): ToolRegistry => {
            const plugins = PluginToolRegistry.load({
              services: { sandbox, memory: o.memory ?? null },
              pluginDirs:
                typeof o.plugins === 'string' || o.plugins === undefined
                  ? parsePluginDirs(o.plugins)
                  : o.plugins,
              logger: loggerOf(o),
            });
            return o.mcp?.servers.length ? new McpToolRegistry(plugins, mcp) : plugins;
          },
          inject: [TOOLS_OPTIONS, ToolSandbox, McpClientManager],
        },
      ],
      exports: [ToolSandbox, ToolRegistry, McpClientManager],
    });
  }
}
