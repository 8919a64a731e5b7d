import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(__dirname, '..');
const THRESHOLDS = join(ROOT, 'gates', 'thresholds.json');

/** `npm run gates -- <args>` as a child process (the script it runs, from the sources). */
function gates(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['-r', '@swc-node/register', 'gates/run.ts', ...args], { cwd: ROOT });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

describe('npm run gates (child process)', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'rl-gates-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('every gate has a threshold with its reason in the committed file', () => {
    const committed = JSON.parse(readFileSync(THRESHOLDS, 'utf8')) as Record<string, { reason: string }>;
    expect(Object.keys(committed).sort()).toEqual(
      ['context_growth', 'hangs', 'malformed_tool_turns', 'replay_divergence', 'tokens_per_task'].sort(),
    );
    for (const t of Object.values(committed)) expect(t.reason.length).toBeGreaterThan(40);
  });

  it('passes against the committed thresholds, and fails (exit 1, FAIL in the table) against an impossible one', async () => {
    const pass = await gates(['--only', 'tokens_per_task']);
    expect(pass.stdout).toMatch(/^tokens_per_task +\| \d+ +\| <= 1500 .*\| PASS /m);
    expect(pass.stdout).toContain('all 1 gates passed');
    expect(pass.code).toBe(0);

    const impossible = JSON.parse(readFileSync(THRESHOLDS, 'utf8'));
    impossible.tokens_per_task.max = 0;
    const file = join(dir, 'impossible.json');
    writeFileSync(file, JSON.stringify(impossible));
    const fail = await gates(['--only', 'tokens_per_task', '--thresholds', file]);
    expect(fail.stdout).toMatch(/^tokens_per_task +\| \d+ +\| <= 0 .*\| FAIL /m);
    expect(fail.stdout).toContain(`1 of 1 gate(s) failed (thresholds: ${file})`);
    expect(fail.code).toBe(1);
  });

  it('a thresholds file without a reason, or an unknown gate, is bad usage (exit 2), nothing run', async () => {
    const reasonless = JSON.parse(readFileSync(THRESHOLDS, 'utf8'));
    delete reasonless.hangs.reason;
    const file = join(dir, 'reasonless.json');
    writeFileSync(file, JSON.stringify(reasonless));
    const bad = await gates(['--thresholds', file]);
    expect(bad.stderr).toContain('hangs.reason');
    expect(bad.stdout).toBe('');
    expect(bad.code).toBe(2);
    const unknown = await gates(['--only', 'speed']);
    expect(unknown.stderr).toContain('unknown gate speed');
    expect(unknown.code).toBe(2);
  });
});
