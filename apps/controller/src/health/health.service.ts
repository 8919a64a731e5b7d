import { Inject, Injectable, Optional } from '@nestjs/common';
import { McpClientManager, McpServerStatus } from '@runledger/tools';
import { HealthReport, SqliteHealthProbe } from './health-probe';

export type HealthResponse = HealthReport & { status: 'ok' | 'degraded'; warnings: string[] };

/** What a healthy service still wants an operator to know. */
function warningsOf(report: HealthReport, mcp: readonly McpServerStatus[]): string[] {
  const warnings =
    report.sandbox === 'process'
      ? [
          'shell commands run without the OS sandbox (bubblewrap not in use): process-level confinement only; install bubblewrap or set RUNLEDGER_SANDBOX=bwrap',
        ]
      : [];
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
    @Inject(SqliteHealthProbe) private readonly probe: SqliteHealthProbe,
    @Optional() @Inject(McpClientManager) private readonly mcp: McpClientManager | null = null,
  ) {}

  async check(): Promise<{ ok: boolean; report: HealthResponse }> {
    const report = await this.probe.check();
    const ok = report.db === 'reachable' && report.migrations === 'current';
    const warnings = warningsOf(report, this.mcp?.status() ?? []);
    return { ok, report: { status: ok ? 'ok' : 'degraded', ...report, warnings } };
  }
}
