import { ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { openSqlite } from '@runledger/event-store';
import { sql } from 'kysely';
import { MIGRATIONS } from './index';

/**
 * Processes that boot together on a fresh SQLite file (a server and a CLI, two
 * servers started by one script) each migrate it; only one may run the migrations.
 */
describe('migrations on SQLite, several processes booting at once', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runledger-mig-race-'));
  });
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** a process that opens and migrates each file in turn once it reads a line on stdin */
  const booter = (paths: string[]) => {
    const script = `
      const { openSqlite } = require('./libs/event-store/src/index.ts');
      const { migrateToLatest } = require('./migrations/index.ts');
      process.stdin.once('data', async () => {
        for (const path of ${JSON.stringify(paths)}) {
          // a process that opens the file while another migrates it waits for the write lock: on a loaded
          // machine a whole migration run can outlast the 5 s default
          let handle;
          try { handle = openSqlite({ path, busyTimeoutMs: 30000 }); await migrateToLatest(handle.db); }
          catch (err) { console.log('FAILED ' + err.message); process.exitCode = 1; }
          finally { await handle?.close(); }
        }
      });
      console.log('ready');`;
    const child = spawn(process.execPath, ['-r', '@swc-node/register', '-e', script], {
      cwd: resolve(__dirname, '..'),
      env: { ...process.env, SWC_NODE_PROJECT: resolve(__dirname, '..', 'tsconfig.json') },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const ready = new Promise<void>((res, rej) => {
      const poll = setInterval(() => {
        if (out.includes('ready')) res(clearInterval(poll));
      }, 10);
      child.once('exit', () => rej(new Error(`exited before ready: ${out}`)));
    });
    const done = new Promise<{ code: number | null; out: string }>((res) =>
      child.once('close', (code) => res({ code, out })),
    );
    return { child, ready, done };
  };

  it('three processes migrating four fresh files together: every one succeeds and each migration runs once', async () => {
    const paths = Array.from({ length: 4 }, (_, i) => join(dir, `fresh-${i}.db`));
    const booters = Array.from({ length: 3 }, () => booter(paths));
    await Promise.all(booters.map((b) => b.ready));
    for (const b of booters) b.child.stdin!.end('go\n');
    const outcomes = await Promise.all(booters.map((b) => b.done));

    expect(outcomes.flatMap((o) => o.out.split('\n').filter((l) => l.startsWith('FAILED')))).toEqual([]);
    // a process that failed says why (its output) instead of only its exit code
    expect(outcomes.map((o) => (o.code === 0 ? 0 : `exit ${o.code}: ${o.out}`))).toEqual([0, 0, 0]);
    for (const path of paths) {
      const handle = openSqlite({ path });
      const applied = await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(
        handle.db,
      );
      expect(applied.rows.map((r) => r.name)).toEqual(Object.keys(MIGRATIONS));
      await handle.close();
    }
  }, 60_000);
});
