import { copyFileSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import Database from 'better-sqlite3';
import { ERASED_VALUE, IllegalStateError } from '@runledger/contracts';
import { MemoryService } from '@runledger/memory';
import { RuntimeController } from '@runledger/runtime';
import { createSqliteStorage } from '@runledger/state-store';
import { describePostgres, runCli, stderrProblems, useTestPostgres } from '@runledger/testing';
// eslint-disable-next-line no-restricted-imports
import { archiveNow } from '../apps/controller/src/cli/archive';
// eslint-disable-next-line no-restricted-imports
import { backupDatabase, verifyDatabase } from '../apps/controller/src/cli/backup';
// eslint-disable-next-line no-restricted-imports
import { APP_CONFIG, AppConfig } from '../apps/controller/src/config';
import { ApiHarness, TOKENS, WsClient, bootApi, readUntil, waitForTask } from './api-harness';

/**
 * Erasure end to end: a session's tasks run with RUNLEDGER_ERASURE=on (payloads sealed), one is
 * archived, a backup is taken, then POST /sessions/:id/erase; every reader serves the content as
 * erased, the archive and the backup taken before hold only ciphertext, replay and fork refuse,
 * another session is untouched, and bad requests write nothing.
 */
jest.setTimeout(60_000);

const SECRET = 'ZebraLovelace42';
const OTHER = 'KeepMe77';

/**
 * `storedRows`: the read models' rows (tasks, checkpoints, memory) as PostgreSQL stores them, each
 * row as text: what pg_dump or a dead tuple holds. SQLite's files are read whole instead.
 */
function erasureSpec(
  env: () => Promise<Record<string, string>>,
  sqlite: boolean,
  storedRows: () => Promise<string> = async () => '',
): void {
  let h: ApiHarness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  const submit = async (server: ApiHarness, input: string, session: string) => {
    const res = await server.request('POST', '/tasks', { body: { input, session_id: session } });
    expect(res.status).toBe(202);
    return res.body.task_id as string;
  };

  it('erases a session: every reader serves it erased, archives and backups hold no plaintext, replay and fork refuse', async () => {
    h = await bootApi({ RUNLEDGER_ERASURE: 'on', RUNLEDGER_MEMORY: 'off', ...(await env()) });
    const server = h;
    const config = server.app.get<AppConfig>(APP_CONFIG);
    const archived = await submit(server, `run echo ${SECRET} one`, 'ses_ada');
    expect((await waitForTask(server, archived)).status).toBe('completed');
    const live = await submit(server, `run echo ${SECRET} two`, 'ses_ada');
    const done = await waitForTask(server, live);
    expect(done.status).toBe('completed');
    expect(JSON.stringify(done)).toContain(SECRET);
    const other = await submit(server, `run echo ${OTHER}`, 'ses_other');
    await waitForTask(server, other);
    const eventsOf = async (id: string) =>
      (await server.request('GET', `/tasks/${id}/events?limit=1000`)).body.events as {
        type: string;
        payload: Record<string, unknown>;
      }[];
    const before = await eventsOf(live);
    expect(JSON.stringify(before)).toContain(SECRET);

    // the log stores the session's content sealed
    if (sqlite) {
      const raw = new Database(config.RUNLEDGER_DB, { readonly: true });
      const payloads = raw
        .prepare<[], { payload: string }>("SELECT payload FROM events WHERE session_id = 'ses_ada'")
        .all();
      raw.close();
      expect(payloads.length).toBeGreaterThan(4);
      expect(payloads.map((p) => p.payload).join('\n')).not.toContain(SECRET);
    }
    const moved = await archiveNow(config, server.dir, { older_than: '0s', dry_run: false });
    expect(moved.tasks).toEqual(expect.arrayContaining([archived, live, other]));
    // a task of the session still running (waiting for a permission) when the backup is taken
    const running = await submit(server, `run touch ${SECRET}-three.txt`, 'ses_ada');
    await waitForTask(server, running, (s) => s === 'awaiting_permission');
    const found = async (q: string) =>
      ((await server.request('GET', `/tasks?q=${encodeURIComponent(q)}`)).body.tasks as { task_id: string }[])
        .map((t) => t.task_id)
        .sort();
    expect(await found(SECRET.toLowerCase())).toEqual([archived, live, running].sort());
    expect((await server.request('GET', '/sessions/ses_ada')).text).toContain(SECRET);
    const backup = join(server.dir, 'backup.db');
    if (sqlite) await backupDatabase(config, backup, server.dir);
    // the read models' copies are sealed at rest too: the database, its WAL, the backup, a dump
    const secret = Buffer.from(SECRET);
    if (sqlite)
      for (const file of [config.RUNLEDGER_DB, `${config.RUNLEDGER_DB}-wal`, backup])
        expect([file, readFileSync(file).includes(secret)]).toEqual([file, false]);
    else expect(await storedRows()).not.toContain(SECRET);

    // bad requests: no scope, bad id, a system stream, no such session, a task not finished
    const waiting = await submit(server, 'run touch wait-for-me.txt', 'ses_wait');
    await waitForTask(server, waiting, (s) => s === 'awaiting_permission');
    for (const [path, token, status] of [
      ['/sessions/ses_ada/erase', TOKENS.writer, 403],
      ['/sessions/system:archive/erase', TOKENS.admin, 400],
      ['/sessions/ses_nobody/erase', TOKENS.admin, 404],
      ['/sessions/ses_wait/erase', TOKENS.admin, 409],
      ['/sessions/ses_ada/erase', TOKENS.admin, 409],
    ] as const) {
      const res = await server.request('POST', path, { token });
      expect([path, res.status]).toEqual([path, status]);
      expect(res.body).toEqual(
        expect.objectContaining({ error: expect.any(String), message: expect.any(String) }),
      );
    }
    expect((await server.request('GET', '/admin/events?type=SESSION_ERASED')).body.events).toEqual([]);
    expect((await server.request('POST', `/tasks/${running}/cancel`)).status).toBeLessThan(300);
    await waitForTask(server, running, (s) => s === 'cancelled');

    const erased = await server.request('POST', '/sessions/ses_ada/erase');
    expect(erased.status).toBe(200);
    expect(erased.body).toMatchObject({
      session_id: 'ses_ada',
      key_destroyed: true,
      task_ids: [archived, live, running].sort(),
      clear_events: 0,
    });
    // a search no longer finds the erased inputs, and still finds the others'
    expect(await found(SECRET.toLowerCase())).toEqual([]);
    expect(await found(OTHER)).toEqual([other]);
    if (!sqlite) expect(await storedRows()).not.toContain(SECRET);

    // every reader: task, events (live and archived), the global log, the session, SSE replay
    for (const id of [archived, live]) {
      const task = (await server.request('GET', `/tasks/${id}`)).body;
      expect(task).toMatchObject({ status: 'completed' });
      expect(JSON.stringify(task)).not.toContain(SECRET);
      const events = await eventsOf(id);
      expect(events.map((e) => e.type)).toEqual(before.map((e) => e.type));
      expect(JSON.stringify(events)).not.toContain(SECRET);
      expect(events[0].payload).toMatchObject({ input: ERASED_VALUE, $erased: 'erased' });
      const sse = await fetch(`${server.url}/tasks/${id}/stream`, {
        headers: { authorization: `Bearer ${TOKENS.admin}` },
        signal: AbortSignal.timeout(3000),
      });
      const text = await readUntil(sse, 'TASK_COMPLETED');
      expect(text).toContain('"$erased":"erased"');
      expect(text).not.toContain(SECRET);
    }
    // WebSocket replay of a task and of the whole log
    const ws = await WsClient.authed(server.wsUrl, TOKENS.admin);
    try {
      ws.send({ type: 'subscribe', task_id: live, after_seq: 0 });
      await ws.waitFor((m) => m.type === 'event' && m.event.type === 'TASK_COMPLETED');
      ws.send({ type: 'subscribe_all', after_position: 0 });
      await ws.waitFor((m) => m.type === 'event' && m.event.type === 'SESSION_ERASED');
      const replayed = JSON.stringify(ws.messages);
      expect(replayed).toContain('"$erased":"erased"');
      expect(replayed).not.toContain(SECRET);
    } finally {
      ws.ws.close();
    }
    const log = await server.request('GET', '/admin/events?after_position=0&limit=1000');
    expect(log.text).not.toContain(SECRET);
    expect(log.text).toContain('run touch wait-for-me.txt'); // another session's, opened
    const session = await server.request('GET', '/sessions/ses_ada');
    expect(session.status).toBe(200);
    expect(session.text).not.toContain(SECRET);
    const dashboardFeed = await server.request('GET', '/tasks?session_id=ses_ada');
    expect(dashboardFeed.text).not.toContain(SECRET);
    // another session reads as before
    expect(JSON.stringify((await server.request('GET', `/tasks/${other}`)).body)).toContain(OTHER);

    // recorded: ids only
    const records = (await server.request('GET', '/admin/events?type=SESSION_ERASED')).body.events as {
      task_id: string;
      payload: unknown;
    }[];
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ task_id: 'system:erasure', payload: { session_id: 'ses_ada' } });

    // replay and fork say why they cannot, instead of running on placeholders
    const runtime = server.app.get(RuntimeController);
    await expect(runtime.replay(live)).rejects.toThrow(IllegalStateError);
    await expect(runtime.replay(live)).rejects.toThrow(
      /erased \(with its session ses_ada or its task tree\): a replay cannot/,
    );
    const fork = await server.request('POST', `/tasks/${live}/fork`, { body: { at_sequence: 1 } });
    expect([fork.status, fork.body.message]).toEqual([409, expect.stringContaining('erased')]);
    // the session takes no more tasks; erasing again scrubs again, records nothing new
    const refused = await server.request('POST', '/tasks', {
      body: { input: 'run echo again', session_id: 'ses_ada' },
    });
    expect(refused.status).toBe(409);
    const again = await server.request('POST', '/sessions/ses_ada/erase');
    expect([again.status, again.body.key_destroyed]).toEqual([200, false]);
    expect((await server.request('GET', '/admin/events?type=SESSION_ERASED')).body.events).toHaveLength(1);

    if (!sqlite) return;
    // the archive segments and the backup (taken before the erasure) never held the content
    const segments = readdirSync(`${config.RUNLEDGER_DB}.archive`).filter((f) => f.endsWith('.jsonl.gz'));
    expect(segments.length).toBeGreaterThan(0);
    for (const s of segments) {
      const text = gunzipSync(readFileSync(join(`${config.RUNLEDGER_DB}.archive`, s))).toString();
      const at = text.indexOf(SECRET);
      expect(at < 0 ? '' : text.slice(Math.max(0, at - 300), at + 100)).toBe('');
    }
    const copy = new Database(backup, { readonly: true });
    const copied = copy.prepare<[], { payload: string }>('SELECT payload FROM events').all();
    const rows = copy.prepare<[], Record<string, unknown>>('SELECT * FROM tasks').all();
    copy.close();
    expect(copied.map((p) => p.payload).join('\n')).not.toContain(SECRET);
    expect(JSON.stringify(rows)).not.toContain(SECRET);
    expect(rows.filter((r) => String(r.input).startsWith('{"$sealed":')).length).toBeGreaterThanOrEqual(3);
    expect(readFileSync(backup).includes(Buffer.from(SECRET))).toBe(false);
    expect((await verifyDatabase(config, backup, server.dir)).problems).toEqual([]);
    // restored beside the key file: the other session's rows read in clear, the erased one's erased,
    // with or without a rebuild
    copyFileSync(`${config.RUNLEDGER_DB}.keys`, `${backup}.keys`);
    const restored = await createSqliteStorage({ path: backup, sealPayloads: true });
    try {
      for (let pass = 0; pass < 2; pass++) {
        expect((await restored.taskStates.get(other))?.input).toBe(`run echo ${OTHER}`);
        expect((await restored.taskStates.get(live))?.input).toBe(ERASED_VALUE);
        expect((await restored.taskStates.get(running))?.input).toBe(ERASED_VALUE);
        await restored.taskStates.rebuild();
      }
    } finally {
      await restored.close();
    }
    // verify folds the erased log and agrees with the scrubbed rows
    const verified = await verifyDatabase(config, config.RUNLEDGER_DB, server.dir);
    expect(verified.problems).toEqual([]);
  });
}

describe('erasure (SQLite)', () => {
  erasureSpec(async () => ({}), true);

  let h: ApiHarness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  it('runledger erase in another process, while the server runs: the server reads it erased at once; memory forgets it', async () => {
    h = await bootApi({ RUNLEDGER_ERASURE: 'on', RUNLEDGER_MEMORY: 'on' });
    const server = h;
    const config = server.app.get<AppConfig>(APP_CONFIG);
    const res = await server.request('POST', '/tasks', {
      body: { input: `run echo ${SECRET}`, session_id: 'ses_cli' },
    });
    const id = res.body.task_id as string;
    await waitForTask(server, id);
    const memory = server.app.get(MemoryService);
    await memory.insert({
      text: `${SECRET} prefers tea`,
      kind: 'user_preference',
      source: 'user',
      weight: 0.9,
      task_id: id,
      session_id: 'ses_cli',
      reason: 'said so',
    });
    expect(JSON.stringify(await memory.list({ session_id: 'ses_cli' }, 10))).toContain(SECRET);
    expect((await memory.search('prefers tea', { k: 1 }))[0].entry.text).toBe(`${SECRET} prefers tea`);
    const sealedAtRest = new Database(config.RUNLEDGER_DB, { readonly: true });
    const atRest = sealedAtRest.prepare('SELECT text, metadata, vector FROM memory_entries').all();
    sealedAtRest.close();
    expect(atRest.length).toBeGreaterThan(0);
    expect(JSON.stringify(atRest)).not.toContain(SECRET);
    expect(JSON.stringify((await server.request('GET', `/tasks/${id}/events?limit=1000`)).body)).toContain(
      SECRET,
    );

    const cli = await runCli(['erase', 'ses_cli', '--json'], {
      cwd: server.dir,
      env: {
        RUNLEDGER_DB: config.RUNLEDGER_DB,
        RUNLEDGER_ERASURE: 'on',
        RUNLEDGER_ALLOWED_ROOT: server.workspace,
      },
    });
    expect(stderrProblems(cli.stderr)).toEqual([]);
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({
      erase: { session_id: 'ses_cli', key_destroyed: true, task_ids: [id] },
    });
    // the server's own cache learnt it from the key file: its next read serves the task erased
    const events = (await server.request('GET', `/tasks/${id}/events?limit=1000`)).text;
    expect(events).not.toContain(SECRET);
    expect(events).toContain('"$erased":"erased"');
    // the memory tool's insert (system stream) and the erasure's deletes do not show it either
    const log = await server.request('GET', '/admin/events?after_position=0&limit=1000');
    expect(log.text).toContain('session erased');
    expect(log.text).not.toContain(SECRET);
    // the erasing process forgot the entry; the server's memory follows the log's delete
    await memory.sync();
    expect(JSON.stringify(await memory.list({ session_id: 'ses_cli' }, 10))).not.toContain(SECRET);
    const raw = new Database(config.RUNLEDGER_DB, { readonly: true });
    const texts = raw
      .prepare<[], { text: string }>("SELECT text FROM memory_entries WHERE session_id = 'ses_cli'")
      .all();
    raw.close();
    expect(texts.map((t) => t.text).join('')).not.toContain(SECRET);
    const again = await server.request('POST', '/tasks', {
      body: { input: 'run echo x', session_id: 'ses_cli' },
    });
    expect(again.status).toBe(409);
  });
});

describePostgres('erasure (PostgreSQL)', () => {
  const pg = useTestPostgres();
  let schema: Awaited<ReturnType<typeof pg.freshSchema>> | null = null;
  afterEach(async () => {
    await schema?.dispose();
    schema = null;
  });
  erasureSpec(
    async () => {
      schema = await pg.freshSchema({ migrate: false });
      return { RUNLEDGER_DB: schema.url, RUNLEDGER_PG_SCHEMA: schema.schema };
    },
    false,
    async () => {
      const { rows } = await schema!.handle.pool.query<{ row: string }>(
        `SELECT t::text AS row FROM tasks t UNION ALL SELECT c::text FROM checkpoints c
         UNION ALL SELECT m::text FROM memory_entries m`,
      );
      return rows.map((r) => r.row).join('\n');
    },
  );
});
