import { AgentProfile, BUILT_IN_CODER, ToolManifest, agentDescription } from '@runledger/contracts';

/**
 * The agents a task may delegate to: the built-in `coder`, then the configured
 * profiles (one named `coder` replaces the built-in).
 */
export class AgentCatalog {
  private readonly byName: ReadonlyMap<string, AgentProfile>;

  constructor(configured: readonly AgentProfile[] = []) {
    this.byName = new Map([BUILT_IN_CODER, ...configured].map((a) => [a.name, a]));
  }

  get(name: string): AgentProfile | null {
    return this.byName.get(name) ?? null;
  }

  list(): AgentProfile[] {
    return [...this.byName.values()];
  }

  names(): string[] {
    return [...this.byName.keys()];
  }
}

/** The tools a task may be offered: all of them, or those its agent profile allows. */
export const toolsForAgent = (tools: readonly ToolManifest[], agent: AgentProfile | null): ToolManifest[] =>
  agent?.tools ? tools.filter((t) => agent.tools!.includes(t.name)) : [...tools];

/** One line per agent, for the orchestrator's prompt and the delegate function's description. */
export const agentLines = (agents: readonly AgentProfile[]): string =>
  agents.map((a) => `- ${a.name}: ${agentDescription(a)}`).join('\n');
