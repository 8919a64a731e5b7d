import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import {
  Served,
  getJson,
  runCli,
  servedAuth,
  serveChild,
  settledTask,
  submitTask,
  taskOf,
} from '@runledger/testing';

interface ArchiveJson {
  archive: {
    dry_run: boolean;
    tasks: string[];
    events: number;
    segments: { segment_id: string }[];
    catalogued: { tasks: number };
  };
}

/** A task's rows in the live database's `tasks` and `archived_tasks` (the catalog takes both). */
const liveRows = (db: string, taskId: string): number => {
  const raw = new Database(db, { readonly: true });
  try {
    return (
      raw
        .prepare(
          'SELECT (SELECT count(*) FROM tasks WHERE task_id = ?) + (SELECT count(*) FROM archived_tasks WHERE task_id = ?) AS n',
        )
        .get(taskId, taskId) as { n: number }
    ).n;
  } finally {
    raw.close();
  }
};

const liveEvents = (db: string, taskId: string): number => {
  const raw = new Database(db, { readonly: true });
  try {
    return (raw.prepare('SELECT count(*) AS n FROM events WHERE task_id = ?').get(taskId) as { n: number }).n;
  } finally {
    raw.close();
  }
};

describe('runledger archive / restore / vacuum against a running server (e2e, SQLite files)', () => {
  let dir: string;
  let db: string;
  const servers: Served[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-archive-'));
    mkdirSync(join(dir, 'workspace'));
    db = join(dir, 'data', 'runledger.db');
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('archives finished tasks while the server runs; every read answers the same; verify, backup and restore follow', async () => {
    const live = await serveChild(dir, db);
    servers.push(live);
    const ids = await Promise.all(
      Array.from({ length: 5 }, (_, i) => submitTask(live.url, `list the files ${i}`)),
    );
    const tasks = await Promise.all(ids.map((id) => settledTask(live.url, id)));
    const eventsOf = async (id: string) => (await getJson(live.url, `/tasks/${id}/events?limit=1000`)).body;
    const before = await Promise.all(ids.map(eventsOf));
    const cli = (args: string[]) => runCli(args, { cwd: dir, env: { RUNLEDGER_DB: db } });

    const dry = await cli(['archive', '--older-than', '0s', '--dry-run', '--json']);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    const wouldMove = (JSON.parse(dry.stdout) as ArchiveJson).archive;
    expect(wouldMove.dry_run).toBe(true);
    expect(wouldMove.tasks).toEqual(expect.arrayContaining(ids));
    expect(liveEvents(db, ids[0])).toBeGreaterThan(0);

    const listBefore = (await getJson(live.url, '/tasks?limit=3')).body;
    const sessionBefore = (await getJson(live.url, `/sessions/${tasks[0].session_id as string}`)).body;
    // archived, and at once (a catalog age of 0s) moved on into the archive's catalog
    const moved = await runCli(['archive', '--older-than', '0s', '--json'], {
      cwd: dir,
      env: { RUNLEDGER_DB: db, RUNLEDGER_RETENTION_CATALOG_AFTER: '0s' },
    });
    expect(moved.code).toBe(0);
    const run = (JSON.parse(moved.stdout) as ArchiveJson).archive;
    expect(run.tasks).toEqual(expect.arrayContaining(ids));
    expect(run.events).toBe(wouldMove.events);
    expect(run.catalogued.tasks).toBe(run.tasks.length);
    for (const id of ids) expect(liveEvents(db, id)).toBe(0);
    for (const id of ids) expect(liveRows(db, id)).toBe(0);
    expect((await getJson(live.url, '/tasks?limit=3')).body).toEqual(listBefore);
    const session = tasks[0].session_id as string;
    expect((await getJson(live.url, `/sessions/${session}`)).body).toEqual(sessionBefore);
    // SSE replays a catalogued task's events from its segment, then ends with it
    const sse = await fetch(`${live.url}/tasks/${ids[1]}/stream`, { headers: servedAuth });
    const text = await sse.text();
    expect(text.match(/^id: /gm)).toHaveLength((before[1].events as unknown[]).length);
    // runledger replay re-runs it offline from its recorded events and matches its recording, as a
    // live task's replay does (a task sys_util does not understand: its not_understood stop again)
    const verdict = async (id: string) => {
      const { replay } = JSON.parse(
        (await cli(['replay', id, '--json'])).stdout.trim().split('\n').pop()!,
      ) as {
        replay: { source_task_id: string; matches: boolean; compared: number; detail: string | null };
      };
      return replay;
    };
    const twin = await submitTask(live.url, 'list the files 1');
    expect((await settledTask(live.url, twin)).stop_reason).toBe('not_understood');
    const [archivedReplay, liveReplay] = [await verdict(ids[1]), await verdict(twin)];
    expect(archivedReplay).toMatchObject({
      source_task_id: ids[1],
      matches: true,
      compared: (before[1].events as unknown[]).length,
      detail: null,
    });
    expect(liveReplay).toMatchObject({ source_task_id: twin, matches: true, detail: null });
    const fork = await fetch(`${live.url}/tasks/${ids[1]}/fork`, {
      method: 'POST',
      headers: servedAuth,
      body: JSON.stringify({ at_sequence: 1 }),
    });
    expect(fork.status).toBe(202);
    const forked = await settledTask(live.url, ((await fork.json()) as { task_id: string }).task_id);
    expect(forked.status).toBe(tasks[1].status);
    // and takes no events: a cancel of the finished task is refused, nothing is written
    const cancel = await fetch(`${live.url}/tasks/${ids[1]}/cancel`, { method: 'POST', headers: servedAuth });
    expect(cancel.status).toBe(409);
    expect(liveEvents(db, ids[1])).toBe(0);
    const folder = `${db}.archive`;
    // the segments, beside the archive's catalog (where tasks archived long ago are recorded)
    expect(readdirSync(folder).filter((f) => !f.startsWith('catalog.db'))).toEqual(
      run.segments.map((s) => `${s.segment_id}.jsonl.gz`),
    );

    // the server reads archived tasks as it read them live
    for (const [i, id] of ids.entries()) {
      expect(await taskOf(live.url, id)).toEqual(tasks[i]);
      expect(await eventsOf(id)).toEqual(before[i]);
    }
    const page = (await getJson(live.url, '/admin/events?after_position=0&limit=1000')).body as {
      events: { task_id: string }[];
      archived: { segment_id: string; task_ids: string[] }[];
    };
    expect(page.events.filter((e) => ids.includes(e.task_id))).toEqual([]);
    expect(page.events.map((e) => e.task_id)).toContain('system:archive');
    expect(page.archived.flatMap((r) => r.task_ids)).toEqual(expect.arrayContaining(ids));
    // and goes on running tasks
    const fresh = await submitTask(live.url, 'list the files 0');
    const ended = await settledTask(live.url, fresh);
    expect([ended.status, ended.stop_reason]).toEqual([tasks[0].status, tasks[0].stop_reason]);

    const verified = await runCli(['verify', db, '--json'], { cwd: dir });
    // every task, the catalogued ones too (the twin, the fork and the fresh one are live)
    expect(JSON.parse(verified.stdout)).toMatchObject({ verify: { ok: true, problems: [], tasks: 8 } });
    expect(verified.code).toBe(0);
    const copy = join(dir, 'copy.db');
    const backup = await cli(['backup', copy, '--json']);
    expect(JSON.parse(backup.stdout)).toMatchObject({ backup: { segments: run.segments.length } });
    expect(existsSync(`${copy}.archive`)).toBe(true);
    expect(existsSync(`${copy}.archive/catalog.db`)).toBe(true);
    const copyVerified = await runCli(['verify', copy, '--json'], { cwd: dir });
    expect(JSON.parse(copyVerified.stdout)).toMatchObject({ verify: { ok: true, tasks: 8 } });

    const restored = await cli(['restore', ids[2], '--json']);
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ restore: { task_ids: [ids[2]] } });
    expect(liveEvents(db, ids[2])).toBe((before[2].events as unknown[]).length);
    expect(liveRows(db, ids[2])).toBe(1);
    expect(await taskOf(live.url, ids[2])).toEqual(tasks[2]);
    expect(await eventsOf(ids[2])).toEqual(before[2]);

    const vacuumed = await cli(['vacuum', '--json']);
    expect(vacuumed.code).toBe(0);
    expect(JSON.parse(vacuumed.stdout)).toMatchObject({
      vacuum: { mode: expect.stringMatching(/full|incremental/) },
    });
    const again = await cli(['vacuum', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ vacuum: { mode: 'incremental' } });
    expect(await eventsOf(ids[0])).toEqual(before[0]);
  }, 240_000);

  it('refuses what it cannot do: no policy and no age, a bad age, an unknown id, a live task', async () => {
    const live = await serveChild(dir, db);
    servers.push(live);
    const id = await submitTask(live.url, 'list the files');
    await settledTask(live.url, id);
    const cli = (args: string[]) => runCli(args, { cwd: dir, env: { RUNLEDGER_DB: db } });
    const noPolicy = await cli(['archive']);
    expect(noPolicy.code).toBe(2);
    expect(noPolicy.stderr).toContain('RUNLEDGER_RETENTION is off');
    const badAge = await cli(['archive', '--older-than', 'soon']);
    expect(badAge.code).toBe(2);
    expect(badAge.stderr).toContain('is not a duration');
    const unknown = await cli(['restore', 'task_nowhere']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no archived task or segment task_nowhere');
    const notArchived = await cli(['restore', id]);
    expect(notArchived.code).toBe(1);
    expect(notArchived.stderr).toContain('is in the live log');
    // nothing moved: the task is live, as it was
    expect(liveEvents(db, id)).toBeGreaterThan(0);
  }, 180_000);
});
