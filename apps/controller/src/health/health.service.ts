import { Inject, Injectable } from '@nestjs/common';
import { HealthReport, HealthProbe } from './health-probe';

export type HealthResponse = HealthReport & { status: 'ok' | 'degraded'; warnings: string[] };

/** What a healthy service still wants an operator to know. */
function warningsOf(report: HealthReport): string[] {
  return report.sandbox === 'process'
    ? [
        'shell commands run without the OS sandbox (bubblewrap not in use): process-level confinement only; install bubblewrap or set RUNLEDGER_SANDBOX=bwrap',
      ]
    : [];
}

@Injectable()
export class HealthService {
  constructor(@Inject(HealthProbe) private readonly probe: HealthProbe) {}

  async check(): Promise<{ ok: boolean; report: HealthResponse }> {
    const report = await this.probe.check();
    const ok = report.db === 'reachable' && report.migrations === 'current';
    return { ok, report: { status: ok ? 'ok' : 'degraded', ...report, warnings: warningsOf(report) } };
  }
}
