import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PgEventStore } from '@runledger/event-store';
import { describePostgres, runCli, stderrProblems, useTestPostgres } from '@runledger/testing';

jest.setTimeout(60_000);

describePostgres('runledger CLI on PostgreSQL: the data folder (real child processes)', () => {
  const pg = useTestPostgres('rl_cli_pg');
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-cli-pg-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a RUNLEDGER_DATA_DIR that does not exist yet is made: the run completes and its secrets.key is there, mode 0600', async () => {
    const schema = await pg.freshSchema();
    const data = join(dir, 'not', 'yet', 'data');
    try {
      const res = await runCli(['run', 'run echo made', '--yes'], {
        cwd: dir,
        env: {
          RUNLEDGER_DB: schema.url,
          RUNLEDGER_PG_SCHEMA: schema.schema,
          RUNLEDGER_DATA_DIR: data,
          RUNLEDGER_SANDBOX: 'process',
        },
      });
      expect(stderrProblems(res.stderr)).toEqual([]);
      expect(res.code).toBe(0);
      expect(res.stdout).toContain('made');
      expect(readdirSync(data)).toContain('secrets.key');
      expect(statSync(join(data, 'secrets.key')).mode & 0o777).toBe(0o600);
      const events = await new PgEventStore(schema.handle).readAll();
      expect(events.map((e) => e.type)).toContain('TASK_COMPLETED');
    } finally {
      await schema.dispose();
    }
  });

  it('a data folder that cannot be made is one line naming it, exit 1 at once, and nothing is written to the log', async () => {
    const schema = await pg.freshSchema();
    // a regular file where the folder's parent would be: mkdir fails with ENOTDIR
    writeFileSync(join(dir, 'a-file'), 'not a folder');
    const data = join(dir, 'a-file', 'data');
    try {
      const started = Date.now();
      const res = await runCli(['run', 'run echo never', '--yes'], {
        cwd: dir,
        env: {
          RUNLEDGER_DB: schema.url,
          RUNLEDGER_PG_SCHEMA: schema.schema,
          RUNLEDGER_DATA_DIR: data,
          RUNLEDGER_SANDBOX: 'process',
        },
      });
      expect(res.code).toBe(1);
      // the process ends on its own (it used to print ENOENT and hang with its pool open)
      expect(Date.now() - started).toBeLessThan(30_000);
      const problems = stderrProblems(res.stderr);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toContain(`cannot keep ${join(data, 'secrets.key')}`);
      expect(problems[0]).toContain('ENOTDIR');
      expect(problems[0]).toContain('RUNLEDGER_DATA_DIR');
      expect(res.stdout).toBe('');
      expect(await new PgEventStore(schema.handle).readAll()).toEqual([]);
    } finally {
      await schema.dispose();
    }
  });
});
