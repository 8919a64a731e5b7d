import { Inject, Injectable } from '@nestjs/common';
import { ApiBackend, HealthReport } from '../runtime.port';

@Injectable()
export class HealthService {
  constructor(@Inject(ApiBackend) private readonly backend: ApiBackend) {}

  async check(): Promise<{ ok: boolean; report: HealthReport & { status: 'ok' | 'degraded' } }> {
    const report = await this.backend.health();
    const ok = report.db === 'reachable' && report.migrations === 'current';
    return { ok, report: { status: ok ? 'ok' : 'degraded', ...report } };
  }
}
