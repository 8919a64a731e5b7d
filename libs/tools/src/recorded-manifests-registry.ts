import { type ValidateFunction } from 'ajv';
import { ToolManifest } from '@runledger/contracts';
import { compileArgsSchema, newArgsCompiler, validateAgainst } from './plugin-tool-registry';
import { ArgsValidation, RegisteredTool, ToolRegistry } from './tool-registry';

/**
 * The tools another process offered, as their manifests say (MCP servers' tools included): listed
 * and their args checked exactly as there, but nothing behind them runs. What an offline replay of a
 * log written elsewhere prompts with and validates against, where those tools do not exist.
 */
export class RecordedManifestsRegistry extends ToolRegistry {
  private readonly tools = new Map<string, { manifest: ToolManifest; validate: ValidateFunction }>();

  constructor(manifests: readonly ToolManifest[]) {
    super();
    const ajv = newArgsCompiler();
    for (const m of manifests) {
      const manifest = ToolManifest.parse(m);
      this.tools.set(manifest.name, { manifest, validate: compileArgsSchema(ajv, manifest) });
    }
  }

  list(): ToolManifest[] {
    return [...this.tools.values()].map((t) => t.manifest);
  }

  get(name: string): RegisteredTool | undefined {
    const tool = this.tools.get(name);
    if (!tool) return undefined;
    return {
      manifest: tool.manifest,
      run: () => Promise.reject(new Error(`${name} is a recorded manifest here: it cannot run`)),
    };
  }

  validateArgs(name: string, args: Record<string, unknown>): ArgsValidation {
    return validateAgainst(name, this.tools.get(name)?.validate, args);
  }
}
