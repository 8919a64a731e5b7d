import { Inject, Injectable, Optional } from '@nestjs/common';
import { MemoryIndexStatus, MemoryService } from '@runledger/memory';
import { McpClientManager, McpServerStatus } from '@runledger/tools';
import { HealthReport, HealthProbe } from './health-probe';

export type HealthResponse = HealthReport & {
  status: 'ok' | 'degraded';
  /** the vector index of memory; null when memory is off */
  memory: MemoryIndexStatus | null;
  warnings: string[];
};

/** What a healthy service still wants an operator to know. */
function warningsOf(
  report: HealthReport,
  memory: MemoryIndexStatus | null,
  mcp: readonly McpServerStatus[],
): string[] {
  const warnings: string[] = [];
  if (report.sandbox === 'process')
    warnings.push(
      'shell commands run without the OS sandbox (bubblewrap not in use): process-level confinement only; install bubblewrap or set RUNLEDGER_SANDBOX=bwrap',
    );
  if (memory?.index === 'rebuilding')
    warnings.push(
      `the memory index is being rebuilt (${memory.rebuilt_because}): recall scans every stored entry until it is ready`,
    );
  // a server that is down leaves the service up, without that server's tools
  for (const s of mcp)
    if (s.state !== 'ready')
      warnings.push(
        `MCP server ${s.name} is ${s.state}${s.error ? ` (${s.error})` : ''}: its tools are absent`,
      );
  return warnings;
}

@Injectable()
export class HealthService {
  constructor(
    @Inject(HealthProbe) private readonly probe: HealthProbe,
    @Inject(MemoryService) private readonly memory: MemoryService | null,
    @Optional() @Inject(McpClientManager) private readonly mcp: McpClientManager | null = null,
  ) {}

  async check(): Promise<{ ok: boolean; report: HealthResponse }> {
    const report = await this.probe.check();
    const memory = this.memory?.indexStatus ?? null;
    // a rebuilding index is no fault: recall still answers, exactly, only slower
    const ok = report.db === 'reachable' && report.migrations === 'current';
    const warnings = warningsOf(report, memory, this.mcp?.status() ?? []);
    return { ok, report: { status: ok ? 'ok' : 'degraded', ...report, memory, warnings } };
  }
}
