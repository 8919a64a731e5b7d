import Ajv, { type ValidateFunction } from 'ajv';
import { MCP_TOOL_PREFIX, ToolManifest, ToolResult, isMcpToolName } from '@runledger/contracts';
import {
  BUILTIN_PLUGIN_DIR,
  ToolDiscovery,
  type PluginProblem,
  type ToolImplementation,
  type ToolLogger,
  type ToolServices,
} from './discovery';
import { ArgsValidation, RegisteredTool, ToolExecutionContext, ToolRegistry } from './tool-registry';

export interface ToolDefinition {
  manifest: ToolManifest;
  implementation: ToolImplementation;
  /** where it came from, for problems and /health */
  source?: string;
}

export interface LoadToolsOptions {
  services: ToolServices;
  /** extra plugin folders (RUNLEDGER_PLUGINS) */
  pluginDirs?: readonly string[];
  /** default true */
  builtins?: boolean;
  logger?: ToolLogger;
}

class Tool implements RegisteredTool {
  constructor(
    readonly manifest: ToolManifest,
    private readonly implementation: ToolImplementation,
    readonly validate: ValidateFunction,
  ) {}

  async run(args: Record<string, unknown>, ctx: ToolExecutionContext): Promise<ToolResult> {
    const out = await this.implementation.run(args, ctx);
    return {
      tool: this.manifest.name,
      ok: out.ok,
      output: out.output,
      error: out.error ?? null,
      metadata: out.metadata ?? {},
    };
  }
}

/**
 * ToolRegistry over plugin folders (built-ins under libs/tools/plugins plus RUNLEDGER_PLUGINS).
 * Args are checked with ajv against each manifest's args_schema, compiled once at load.
 * Constructed directly from definitions it is the in-memory registry for tests.
 */
export class PluginToolRegistry extends ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private readonly ajv = newArgsCompiler();
  /** plugins that were reported and skipped */
  readonly problems: PluginProblem[] = [];

  constructor(definitions: readonly ToolDefinition[] = [], logger?: ToolLogger) {
    super();
    for (const def of definitions) {
      try {
        this.add(def);
      } catch (e) {
        const problem = {
          dir: def.source ?? def.manifest.name,
          error: e instanceof Error ? e.message : String(e),
        };
        this.problems.push(problem);
        logger?.warn({ plugin: problem.dir, error: problem.error }, 'tool plugin skipped');
      }
    }
  }

  static load(options: LoadToolsOptions): PluginToolRegistry {
    const discovery = new ToolDiscovery();
    const builtin =
      options.builtins === false
        ? { plugins: [], problems: [] }
        : discovery.discover([BUILTIN_PLUGIN_DIR], true);
    const extra = discovery.discover(options.pluginDirs ?? []);
    const definitions: ToolDefinition[] = [];
    const problems: PluginProblem[] = [...builtin.problems, ...extra.problems];
    for (const p of [...builtin.plugins, ...extra.plugins]) {
      try {
        definitions.push({
          manifest: p.manifest,
          implementation: p.module.createTool(options.services),
          source: p.dir,
        });
      } catch (e) {
        problems.push({
          dir: p.dir,
          error: `createTool failed: ${e instanceof Error ? e.message : String(e)}`,
        });
      }
    }
    for (const problem of problems)
      options.logger?.warn({ plugin: problem.dir, error: problem.error }, 'tool plugin skipped');
    const registry = new PluginToolRegistry(definitions, options.logger);
    registry.problems.unshift(...problems);
    return registry;
  }

  private add(def: ToolDefinition): void {
    const manifest = ToolManifest.parse(def.manifest);
    if (isMcpToolName(manifest.name))
      throw new Error(
        `${manifest.name}: names starting with ${MCP_TOOL_PREFIX} belong to MCP servers' tools`,
      );
    if (this.tools.has(manifest.name)) throw new Error(`duplicate tool name ${manifest.name}`);
    if (typeof def.implementation?.run !== 'function')
      throw new Error(`${manifest.name}: implementation has no run()`);
    this.tools.set(
      manifest.name,
      new Tool(manifest, def.implementation, compileArgsSchema(this.ajv, manifest)),
    );
  }

  list(): ToolManifest[] {
    return [...this.tools.values()].map((t) => t.manifest);
  }

  get(name: string): RegisteredTool | undefined {
    return this.tools.get(name);
  }

  validateArgs(name: string, args: Record<string, unknown>): ArgsValidation {
    return validateAgainst(name, this.tools.get(name)?.validate, args);
  }
}

/** What a registry compiles its tools' args schemas with (one per registry: ajv keeps each schema's $id). */
export const newArgsCompiler = (): Ajv => new Ajv({ allErrors: true, strict: false, useDefaults: false });

/** The manifest's args_schema compiled once; throws naming the tool when it is no JSON Schema. */
export function compileArgsSchema(ajv: Ajv, manifest: ToolManifest): ValidateFunction {
  try {
    return ajv.compile(manifest.args_schema);
  } catch (e) {
    throw new Error(`${manifest.name}: args_schema is not a valid JSON Schema: ${(e as Error).message}`);
  }
}

/** `args` checked by the tool's compiled schema (undefined: no such tool); never throws. */
export function validateAgainst(
  name: string,
  validate: ValidateFunction | undefined,
  args: Record<string, unknown>,
): ArgsValidation {
  if (!validate) return { ok: false, error: `unknown tool ${JSON.stringify(name)}` };
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    return { ok: false, error: 'args must be an object' };
  if (validate(args)) return { ok: true };
  const detail = (validate.errors ?? []).map(
    (e) =>
      `${e.instancePath || '(args)'} ${e.message ?? 'invalid'}${e.params && 'additionalProperty' in e.params ? ` (${String(e.params.additionalProperty)})` : ''}`,
  );
  return { ok: false, error: `invalid args for ${name}: ${detail.join('; ')}` };
}
