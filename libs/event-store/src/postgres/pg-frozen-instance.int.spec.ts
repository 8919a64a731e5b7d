import { ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { TempPostgres, describePostgres, useTestPostgres } from '@runledger/testing';
import { taskReceived } from '../testing/events';
import { PgEventStore } from './pg-event-store';

/**
 * An instance frozen (SIGSTOP, a VM paused, a partition) inside its append
 * transaction holds the append lock that orders every instance's appends; the
 * database ends that transaction, so the others lose seconds, not the pause.
 */
describePostgres('PgEventStore: an instance frozen while it holds the append lock', () => {
  const pg = useTestPostgres();
  let db: TempPostgres;
  let frozen: ChildProcess | null = null;

  beforeEach(async () => {
    db = await pg.freshSchema();
  });
  afterEach(async () => {
    frozen?.kill('SIGKILL');
    frozen = null;
    await db.dispose();
  });

  /** another instance (its own process and pool, opened as the service opens it) stopped mid-append */
  const instanceFrozenInAppend = async () => {
    const script = `
      const { openPostgres, PgEventStore } = require('./libs/event-store/src/index.ts');
      const handle = openPostgres({ url: process.env.PG_URL, schema: process.env.PG_SCHEMA });
      const stalled = {
        name: 'stalled',
        reset: async () => undefined,
        // inside the append transaction, after the lock: say so, and go on a moment after (once continued)
        apply: () => { process.stdout.write('holding\\n'); return new Promise((r) => setTimeout(r, 500)); },
      };
      const store = new PgEventStore(handle, { projections: [stalled], pollMs: 0 });
      store.append('frozen', [{ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } }], { expected: 'no_stream' })
        .then(() => console.log('appended'), (err) => console.log('refused: ' + err.message));`;
    const child = spawn(process.execPath, ['-r', '@swc-node/register', '-e', script], {
      cwd: resolve(__dirname, '../../../..'),
      env: { ...process.env, PG_URL: db.url, PG_SCHEMA: db.schema },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    frozen = child;
    let out = '';
    child.stderr!.on('data', (c: Buffer) => (out += c.toString('utf8')));
    await new Promise<void>((res, rej) => {
      child.stdout!.on('data', (c: Buffer) => {
        out += c.toString('utf8');
        if (out.includes('holding')) res();
      });
      child.once('exit', () => rej(new Error(`the other instance exited: ${out}`)));
    });
    child.kill('SIGSTOP');
    /** what its append came to, once it runs again */
    const outcome = () =>
      new Promise<string>((res, rej) => {
        const poll = setInterval(() => {
          const found = out.split('\n').find((l) => /^(appended|refused)/.test(l));
          if (found) res((clearInterval(poll), found));
        }, 20);
        child.once('exit', (code, signal) =>
          rej(new Error(`the other instance exited (${code ?? signal}): ${out}`)),
        );
      });
    return { child, outcome };
  };

  it('the other instance commits within seconds; continued, the frozen one finds its append refused and lives on', async () => {
    const other = await instanceFrozenInAppend();
    const { rows } = await db.handle.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    expect(rows[0].n).toBe(1);

    const sut = new PgEventStore(db.handle, { pollMs: 0 });
    const started = Date.now();
    const committed = sut.append('live', [taskReceived()], { expected: 'no_stream' }).then(() => 'committed');
    const waited = new Promise((r) => setTimeout(() => r('still waiting'), 15_000).unref());
    expect(await Promise.race([committed, waited])).toBe('committed');
    expect(Date.now() - started).toBeLessThan(10_000);
    expect((await sut.readStream('live')).map((e) => e.type)).toEqual(['TASK_RECEIVED']);
    expect(await sut.readStream('frozen')).toEqual([]);

    other.child.kill('SIGCONT');
    // the server ended its connection: its append meets that error, or, when the client saw the error
    // first, pg's refusal to query a connection it knows is broken
    expect(await other.outcome()).toMatch(
      /^refused: .*(idle-in-transaction|terminat|connection error and is not queryable)/,
    );
    await new Promise((r) => setTimeout(r, 200));
    // it may end on its own once nothing is left for it to do (its pool empty), but never by a crash (exit 1)
    expect([null, 0]).toContain(other.child.exitCode);
    await sut.close();
  }, 40_000);
});
