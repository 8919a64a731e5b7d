import { MemoryIndexStatus, MemoryService } from '@runledger/memory';
import { McpClientManager } from '@runledger/tools';
import { HealthReport, HealthProbe } from './health-probe';
import { HealthService } from './health.service';

const serviceWith = (report: HealthReport, memory: MemoryIndexStatus | null = null) =>
  new HealthService(
    { check: async () => report } as unknown as HealthProbe,
    memory && ({ indexStatus: memory } as unknown as MemoryService),
  );

describe('HealthService', () => {
  it('is ok with the OS sandbox and says nothing more', async () => {
    const sut = serviceWith({ db: 'reachable', migrations: 'current', sandbox: 'bwrap' });
    expect(await sut.check()).toEqual({
      ok: true,
      report: {
        status: 'ok',
        db: 'reachable',
        migrations: 'current',
        sandbox: 'bwrap',
        memory: null,
        warnings: [],
      },
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

  it('stays ok while the memory index is rebuilt, says so, and says nothing once it is ready', async () => {
    const report = { db: 'reachable', migrations: 'current', sandbox: 'bwrap' } as const;
    const rebuilding = await serviceWith(report, { index: 'rebuilding', rebuilt_because: 'missing' }).check();
    expect(rebuilding.ok).toBe(true);
    expect(rebuilding.report.memory).toEqual({ index: 'rebuilding', rebuilt_because: 'missing' });
    expect(rebuilding.report.warnings).toEqual([
      expect.stringMatching(/memory index is being rebuilt \(missing\)/),
    ]);
    const ready = await serviceWith(report, { index: 'ready', rebuilt_because: 'missing' }).check();
    expect([ready.ok, ready.report.warnings]).toEqual([true, []]);
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

  it('stays ok but warns for each MCP server that is not ready, naming why', async () => {
    const mcp = {
      status: () => [
        {
          name: 'up',
          transport: 'stdio',
          state: 'ready',
          tools: ['mcp__up__x'],
          error: null,
          restarts: 0,
          pid: 1,
        },
        {
          name: 'gone',
          transport: 'stdio',
          state: 'failed',
          tools: [],
          error: 'gone: not found on PATH',
          restarts: 3,
          pid: null,
        },
      ],
    } as unknown as McpClientManager;
    const sut = new HealthService(
      {
        check: async () => ({ db: 'reachable', migrations: 'current', sandbox: 'bwrap' }),
      } as unknown as HealthProbe,
      null,
      mcp,
    );
    const { ok, report } = await sut.check();
    expect(ok).toBe(true);
    expect(report.warnings).toEqual([
      'MCP server gone is failed (gone: not found on PATH): its tools are absent',
    ]);
  });
});
