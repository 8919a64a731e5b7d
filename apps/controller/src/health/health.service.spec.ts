import { HealthReport, HealthProbe } from './health-probe';
import { HealthService } from './health.service';

const serviceWith = (report: HealthReport) =>
  new HealthService({ check: async () => report } as unknown as HealthProbe);

describe('HealthService', () => {
  it('is ok with the OS sandbox and says nothing more', async () => {
    const sut = serviceWith({ db: 'reachable', migrations: 'current', sandbox: 'bwrap' });
    expect(await sut.check()).toEqual({
      ok: true,
      report: { status: 'ok', db: 'reachable', migrations: 'current', sandbox: 'bwrap', warnings: [] },
    });
  });

  it('stays ok but warns when shell commands run without the OS sandbox', async () => {
    const { ok, report } = await serviceWith({
      db: 'reachable',
      migrations: 'current',
      sandbox: 'process',
    }).check();
    expect(ok).toBe(true);
    expect(report.warnings).toEqual([expect.stringMatching(/without the OS sandbox/)]);
  });

  it.each<[Partial<HealthReport>]>([
    [{ db: 'unreachable', migrations: 'unknown' }],
    [{ migrations: 'pending' }],
  ])('is degraded when %j', async (over) => {
    const { ok, report } = await serviceWith({
      db: 'reachable',
      migrations: 'current',
      sandbox: 'bwrap',
      ...over,
    }).check();
    expect([ok, report.status]).toEqual([false, 'degraded']);
  });
});
