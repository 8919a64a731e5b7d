import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  Served,
  runCli,
  serveChild as serve,
  servedAuth as auth,
  settledTask as settled,
  submitTask as submit,
  taskOf,
} from '@runledger/testing';

describe('backup, verify and restore (e2e, CLI child processes against a running server)', () => {
  let dir: string;
  const servers: Served[] = [];
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
    // the restored server runs on: a new task ends there as the same request did before the copy
    const fresh = await submit(restored.url, 'list the files 0');
    const ended = await settled(restored.url, fresh);
    expect([ended.status, ended.stop_reason]).toEqual([finished[0].status, finished[0].stop_reason]);
  }, 240_000);

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
  }, 180_000);
});
