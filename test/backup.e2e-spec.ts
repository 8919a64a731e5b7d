import { ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { CliResult, runCli, servedUrl, spawnCli } from '@runledger/testing';

const TOKEN = 'tok-backup-e2e-0123456789abcdef';
const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

interface Server {
  url: string;
  child: ChildProcess;
  stop(): Promise<CliResult>;
}

/** `runledger serve` on `db` as a child process, once it answers. */
async function serve(dir: string, db: string): Promise<Server> {
  const { child, done } = spawnCli(['serve'], {
    cwd: dir,
    env: {
      PORT: '0',
      HOST: '127.0.0.1',
      RUNLEDGER_DB: db,
      RUNLEDGER_ALLOWED_ROOT: join(dir, 'workspace'),
      RUNLEDGER_ADMIN_TOKEN: TOKEN,
      RUNLEDGER_SANDBOX: 'process',
      RUNLEDGER_RATE_LIMIT: '0',
      // the machine running the tests is busy: never shed a submission here
      RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: '0',
      RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '1',
      RUNLEDGER_TASK_START_LOOP_UTILIZATION: '1',
      LOG_LEVEL: 'info',
    },
  });
  return {
    url: await servedUrl(child),
    child,
    stop: async () => {
      child.kill('SIGTERM');
      return done;
    },
  };
}

const submit = async (url: string, input: string): Promise<string> => {
  const res = await fetch(`${url}/tasks`, { method: 'POST', headers: auth, body: JSON.stringify({ input }) });
  expect(res.status).toBe(202);
  return ((await res.json()) as { task_id: string }).task_id;
};

const taskOf = async (url: string, id: string): Promise<Record<string, unknown>> => {
  const res = await fetch(`${url}/tasks/${id}`, { headers: auth });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
};

async function settled(url: string, id: string): Promise<Record<string, unknown>> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    const task = await taskOf(url, id);
    if (['completed', 'failed', 'cancelled'].includes(task.status as string)) return task;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`task ${id} did not end`);
}

describe('backup, verify and restore (e2e, CLI child processes against a running server)', () => {
  let dir: string;
  const servers: Server[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-backup-'));
    mkdirSync(join(dir, 'workspace'));
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('backs up while tasks are written, verifies the copy, and a server started on the copy serves the same tasks', async () => {
    const db = join(dir, 'data', 'runledger.db');
    const live = await serve(dir, db);
    servers.push(live);
    const before = await Promise.all(
      Array.from({ length: 6 }, (_, i) => submit(live.url, `list the files ${i}`)),
    );
    const finished = await Promise.all(before.map((id) => settled(live.url, id)));

    // tasks keep arriving while the copy is taken
    let writing = true;
    const during: string[] = [];
    const load = (async () => {
      while (writing) {
        during.push(await submit(live.url, `list the files again ${during.length}`));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const backup = join(dir, 'backups', 'copy.db');
    mkdirSync(join(dir, 'backups'));
    const copied = await runCli(['backup', backup, '--json'], { cwd: dir, env: { RUNLEDGER_DB: db } });
    writing = false;
    await load;
    expect(copied.stderr).toBe('');
    expect(copied.code).toBe(0);
    const result = (JSON.parse(copied.stdout) as { backup: { file: string; events: number } }).backup;
    expect(result.file).toBe(backup);
    expect(result.events).toBeGreaterThan(0);
    expect(during.length).toBeGreaterThan(0);
    expect(readdirSync(join(dir, 'backups'))).toEqual(['copy.db']);

    const verified = await runCli(['verify', backup, '--json'], { cwd: dir });
    expect(verified.code).toBe(0);
    const report = (
      JSON.parse(verified.stdout) as { verify: { ok: boolean; tasks: number; problems: unknown[] } }
    ).verify;
    expect(report.problems).toEqual([]);
    expect(report.tasks).toBeGreaterThanOrEqual(before.length);

    // a second backup to the same name is refused and leaves the first alone
    const again = await runCli(['backup', backup], { cwd: dir, env: { RUNLEDGER_DB: db } });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('exists');

    // restore: the copy becomes the database of a new server
    await Promise.all(during.map((id) => settled(live.url, id)));
    const restoredDb = join(dir, 'restored', 'runledger.db');
    mkdirSync(join(dir, 'restored'));
    copyFileSync(backup, restoredDb);
    const restored = await serve(dir, restoredDb);
    servers.push(restored);
    for (const [i, id] of before.entries()) expect(await taskOf(restored.url, id)).toEqual(finished[i]);
    const events = async (url: string, id: string) =>
      (await (await fetch(`${url}/tasks/${id}/events`, { headers: auth })).json()) as unknown;
    expect(await events(restored.url, before[0])).toEqual(await events(live.url, before[0]));
    // the restored server runs on: a new task completes there
    const fresh = await submit(restored.url, 'list the files after the restore');
    expect((await settled(restored.url, fresh)).status).toBe('completed');
  }, 120_000);

  it('verify fails on a copy whose projection does not match its log, and on a file that is no database', async () => {
    const db = join(dir, 'data', 'runledger.db');
    const live = await serve(dir, db);
    servers.push(live);
    const id = await submit(live.url, 'list the files');
    await settled(live.url, id);
    const copy = join(dir, 'copy.db');
    expect((await runCli(['backup', copy], { cwd: dir, env: { RUNLEDGER_DB: db } })).code).toBe(0);
    const raw = new Database(copy);
    raw.prepare('UPDATE tasks SET result = ? WHERE task_id = ?').run('not what the log says', id);
    raw.close();
    const tampered = await runCli(['verify', copy], { cwd: dir });
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toContain(`${id}: its row differs from the fold of its events in result`);

    const notDb = join(dir, 'workspace', 'plain.txt');
    writeFileSync(notDb, 'hello');
    const bad = await runCli(['verify', notDb], { cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('is not a Runledger database');
  }, 90_000);
});
