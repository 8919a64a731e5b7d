import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { servedUrl, spawnCli } from '@runledger/testing';

const CONFIGURED = 'tok-admin-banner-0123456789abcdef';

/**
 * `runledger serve` as a child: starts it, checks it answers, stops it with SIGTERM and returns what it wrote to each stream.
 */
async function serveOnce(
  env: Record<string, string>,
): Promise<{ dir: string; stdout: string; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'rl-banner-'));
  mkdirSync(join(dir, 'workspace'));
  const { child, done } = spawnCli(['serve'], {
    cwd: dir,
    env: {
      PORT: '0',
      HOST: '127.0.0.1',
      RUNLEDGER_DB: join(dir, 'runledger.db'),
      RUNLEDGER_ALLOWED_ROOT: join(dir, 'workspace'),
      RUNLEDGER_SANDBOX: 'process',
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  const url = await servedUrl(child);
  expect((await fetch(`${url}/health`)).status).toBe(200);
  child.kill('SIGTERM');
  const result = await done;
  return { dir, stdout: result.stdout, stderr: result.stderr };
}

const jsonLines = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('server output (e2e, runledger serve)', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('prints the dashboard address with the token it generated on stderr; stdout holds only JSON log lines', async () => {
    const out = await serveOnce({ RUNLEDGER_ADMIN_TOKEN: '' });
    dirs.push(out.dir);
    const token = readFileSync(join(out.dir, 'admin.token'), 'utf8').trim();
    expect(out.stderr).toMatch(
      new RegExp(`^dashboard: http://127\\.0\\.0\\.1:\\d+/admin#token=${encodeURIComponent(token)}$`, 'm'),
    );
    expect(out.stderr).toMatch(/^generated admin token in .*admin\.token$/m);
    const logs = jsonLines(out.stdout);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.every((l) => typeof l.level === 'number' && typeof l.msg === 'string')).toBe(true);
    expect(out.stdout).not.toContain('dashboard:');
  }, 60_000);

  it('prints the dashboard address without the token when the token is configured', async () => {
    const out = await serveOnce({ RUNLEDGER_ADMIN_TOKEN: CONFIGURED });
    dirs.push(out.dir);
    expect(out.stderr).toMatch(
      /^dashboard: http:\/\/127\.0\.0\.1:\d+\/admin \(sign in with a configured token\)$/m,
    );
    expect(out.stderr + out.stdout).not.toContain(CONFIGURED);
    const logs = jsonLines(out.stdout);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.every((l) => typeof l.level === 'number' && typeof l.msg === 'string')).toBe(true);
  }, 60_000);
});
