import { ToolManifest, ToolResult } from '@runledger/contracts';
import { ArgsValidation, RegisteredTool, ToolExecutionContext, ToolRegistry } from '../tool-registry';
import { McpClientManager, McpTool } from './mcp-client-manager';

class RegisteredMcpTool implements RegisteredTool {
  constructor(private readonly tool: McpTool) {}

  get manifest(): ToolManifest {
    return this.tool.entry.manifest;
  }

  async run(args: Record<string, unknown>, ctx: ToolExecutionContext): Promise<ToolResult> {
    const out = await this.tool.server.call(this.tool.entry, args, ctx);
    return {
      tool: this.manifest.name,
      ok: out.ok,
      output: out.output,
      error: out.error ?? null,
      metadata: { ...out.metadata, mcp_server: this.tool.server.config.name },
    };
  }
}

/**
 * The plugins' registry plus the tools of the MCP servers that are up, looked up at each call so
 * a tools/list_changed or a restart shows in the next round's tool list.
 */
export class McpToolRegistry extends ToolRegistry {
  constructor(
    private readonly plugins: ToolRegistry,
    readonly mcp: McpClientManager,
  ) {
    super();
  }

  list(): ToolManifest[] {
    return [...this.plugins.list(), ...this.mcp.tools().map((t) => t.entry.manifest)];
  }

  get(name: string): RegisteredTool | undefined {
    const plugin = this.plugins.get(name);
    if (plugin) return plugin;
    const tool = this.mcp.get(name);
    return tool ? new RegisteredMcpTool(tool) : undefined;
  }

  validateArgs(name: string, args: Record<string, unknown>): ArgsValidation {
    const tool = this.mcp.get(name);
    if (!tool) return this.plugins.validateArgs(name, args);
    if (args === null || typeof args !== 'object' || Array.isArray(args))
      return { ok: false, error: 'args must be an object' };
    const validate = tool.entry.validate;
    if (!validate || validate(args)) return { ok: true };
    const detail = (validate.errors ?? []).map(
      (e) => `${e.instancePath || '(args)'} ${e.message ?? 'invalid'}`,
    );
    return { ok: false, error: `invalid args for ${name}: ${detail.join('; ')}` };
  }
}
