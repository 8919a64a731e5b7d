import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { ToolManifest, ToolResult } from '@runledger/contracts';
import type { MemoryToolService } from './memory-tool-service';
import type { ToolSandbox } from './sandbox';
import type { ToolExecutionContext } from './tool-registry';

export type { ToolLogger } from './tool-logger';

/** What a plugin's `createTool` receives. */
export interface ToolServices {
  sandbox: ToolSandbox;
  memory: MemoryToolService | null;
}

/** What a tool's run returns; the registry fills in the tool name and timing. */
export type ToolOutcome = Omit<ToolResult, 'tool' | 'metadata' | 'error'> & {
  error?: string | null;
  metadata?: Record<string, unknown>;
};

export interface ToolImplementation {
  run(args: Record<string, unknown>, ctx: ToolExecutionContext): Promise<ToolOutcome>;
}

/** A plugin module: `module.exports.createTool = (services) => ({ run })`. */
export interface ToolPluginModule {
  createTool(services: ToolServices): ToolImplementation;
}

export interface DiscoveredPlugin {
  dir: string;
  manifest: ToolManifest;
  module: ToolPluginModule;
  builtin: boolean;
}

/** A plugin that could not be loaded, reported at boot and skipped. */
export interface PluginProblem {
  dir: string;
  error: string;
}

/** The built-in plugins: `plugins/` beside `src/`, in the TS tree and in dist alike. */
export const BUILTIN_PLUGIN_DIR = path.resolve(__dirname, '..', 'plugins');

/** `RUNLEDGER_PLUGINS`: `:`-separated folders. */
export const parsePluginDirs = (value: string | undefined): string[] =>
  (value ?? '')
    .split(':')
    .map((s) => s.trim())
    .filter(Boolean);

/**
 * Finds plugin folders (a folder holding `manifest.json`, or a folder of such folders), validates
 * each manifest with zod and loads its module. Nothing here throws for a bad plugin: it becomes a
 * problem and the rest load.
 */
export class ToolDiscovery {
  discover(
    dirs: readonly string[],
    builtin = false,
  ): { plugins: DiscoveredPlugin[]; problems: PluginProblem[] } {
    const plugins: DiscoveredPlugin[] = [];
    const problems: PluginProblem[] = [];
    for (const dir of dirs) {
      for (const candidate of this.pluginFolders(dir, problems)) {
        try {
          plugins.push({ ...this.load(candidate), builtin });
        } catch (e) {
          problems.push({ dir: candidate, error: e instanceof Error ? e.message : String(e) });
        }
      }
    }
    return { plugins, problems };
  }

  private pluginFolders(dir: string, problems: PluginProblem[]): string[] {
    const abs = path.resolve(dir);
    if (!existsSync(abs) || !statSync(abs).isDirectory()) {
      problems.push({ dir: abs, error: 'plugin folder not found' });
      return [];
    }
    if (existsSync(path.join(abs, 'manifest.json'))) return [abs];
    return readdirSync(abs, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => path.join(abs, d.name))
      .filter((d) => {
        if (existsSync(path.join(d, 'manifest.json'))) return true;
        problems.push({ dir: d, error: 'no manifest.json' });
        return false;
      });
  }

  load(dir: string): Omit<DiscoveredPlugin, 'builtin'> {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    } catch (e) {
      throw new Error(`manifest.json is not valid JSON: ${(e as Error).message}`);
    }
    const parsed = ToolManifest.safeParse(raw);
    if (!parsed.success) {
      throw new Error(
        `invalid manifest.json: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      );
    }
    const manifest = parsed.data;
    const entry = this.entryFile(dir, manifest.entry);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require(entry) as Partial<ToolPluginModule> & { default?: Partial<ToolPluginModule> };
    const createTool = mod.createTool ?? mod.default?.createTool;
    if (typeof createTool !== 'function')
      throw new Error(`${path.relative(dir, entry)} does not export createTool(services)`);
    return { dir, manifest, module: { createTool } };
  }

  /** `index.js` when compiled; under a TypeScript loader (jest, swc-node) the `.ts` source. */
  private entryFile(dir: string, entry: string): string {
    const abs = path.resolve(dir, entry);
    if (!abs.startsWith(dir + path.sep)) throw new Error(`entry ${entry} is outside the plugin folder`);
    if (existsSync(abs)) return abs;
    const ts = abs.replace(/\.js$/, '.ts');
    if (ts !== abs && existsSync(ts)) return ts;
    throw new Error(`entry ${entry} not found`);
  }
}
