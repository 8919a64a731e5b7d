import { ChildProcess, spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { createSqliteStorage } from './storage';
import { TempStorage, createTempStorage } from './testing/temp-storage';

describe('ProcessRegistry on SQLite', () => {
  let tmp: TempStorage;
  const children: ChildProcess[] = [];

  beforeEach(async () => {
    tmp = await createTempStorage();
  });
  afterEach(async () => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    await tmp.dispose();
  });

  /** a real process, alive until the test ends */
  const liveChild = async (): Promise<ChildProcess> => {
    const child = spawn('sleep', ['60'], { stdio: 'ignore' });
    children.push(child);
    await new Promise((r) => child.once('spawn', r));
    return child;
  };
  const insert = (row: { pid: number; started_at: string; host?: string }) =>
    tmp.storage.raw
      .prepare('INSERT INTO processes (hostname, pid, started_at, command) VALUES (?, ?, ?, ?)')
      .run(row.host ?? hostname(), row.pid, row.started_at, 'runledger serve');

  it('an opened storage registers its process until the last storage of the file in it closes', async () => {
    const rows = () => tmp.storage.raw.prepare('SELECT pid FROM processes').all();
    expect(rows()).toEqual([{ pid: process.pid }]);
    const second = await createSqliteStorage({ path: tmp.path });
    await second.close();
    expect(rows()).toEqual([{ pid: process.pid }]);
    expect(await tmp.storage.processes.others()).toEqual([]);
  });

  it('others() lists live processes, and drops rows of dead ones and of pids reused by another process', async () => {
    const live = await liveChild();
    const dead = spawn('true', { stdio: 'ignore' });
    await new Promise((r) => dead.once('exit', r));
    const reused = await liveChild();
    const now = new Date().toISOString();
    insert({ pid: live.pid!, started_at: now });
    insert({ pid: dead.pid!, started_at: now });
    insert({ pid: reused.pid!, started_at: '2020-01-01T00:00:00.000Z' });

    expect((await tmp.storage.processes.others()).map((p) => p.pid)).toEqual([live.pid]);
    const left = tmp.storage.raw.prepare('SELECT pid FROM processes ORDER BY pid').all() as { pid: number }[];
    expect(left.map((r) => r.pid).sort()).toEqual([live.pid!, process.pid].sort());
  });
});
