import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
import { LeaseLostError } from '@runledger/contracts';
import { EventBus, EventStore } from '@runledger/event-store';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { Kysely, sql } from 'kysely';
import { CheckpointStore } from './checkpoint-store';
import { LeaseStore } from './lease-store';
import { ProcessRegistry } from './process-registry';
import { STORAGE_DB, StorageModule } from './storage.module';
import { TaskStateStore } from './task-state-store';

describe('StorageModule', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-storage-module-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const boot = (path: string) =>
    NestFactory.createApplicationContext(
      StorageModule.forRootAsync({ useFactory: async () => ({ driver: 'sqlite' as const, path }) }),
      { logger: false, abortOnError: false },
    );

  it('opens and migrates the file; the ports share one database, the projection inline in the append', async () => {
    const sut = await boot(join(dir, 'runledger.db'));
    const store = sut.get(EventStore);
    await store.append(
      'task_1',
      [{ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 'sess_1' } } as never],
      { expected: 'no_stream' },
    );
    expect(await sut.get(TaskStateStore).get('task_1')).toMatchObject({ status: 'queued' });
    expect(sut.get(EventBus)).toBeInstanceOf(EventBus);
    expect(sut.get(CheckpointStore)).toBeInstanceOf(CheckpointStore);
    expect(await sut.get(ProcessRegistry).others()).toEqual([]);
    // the exported LeaseStore is the one the event store fences against
    const lease = (await sut.get(LeaseStore).claim('task_1', 'me', { ttlMs: 60_000 }))!;
    await expect(
      store.append(
        'task_1',
        [{ type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index: 0, delta: 'd' } } as never],
        {
          expected: 1,
          lease: { owner: 'me', epoch: lease.epoch + 1 },
        },
      ),
    ).rejects.toMatchObject({ code: 'lease_lost' });
    const db = sut.get<Kysely<unknown>>(STORAGE_DB);
    expect((await sql<{ n: number }>`SELECT count(*) AS n FROM events`.execute(db)).rows).toEqual([{ n: 1 }]);
    await sut.close();
  });

  it('closes the database on application shutdown', async () => {
    const sut = await boot(':memory:');
    const db = sut.get<Kysely<unknown>>(STORAGE_DB);
    await sut.close();
    await expect(sql`SELECT 1`.execute(db)).rejects.toThrow();
  });
});

describePostgres('StorageModule on PostgreSQL', () => {
  const pg = useTestPostgres();

  it("opens, creates the schema and migrates; the ports share the pool, the projection and the leases' fencing inline", async () => {
    const sut = await NestFactory.createApplicationContext(
      StorageModule.forRootAsync({
        useFactory: async () => ({
          driver: 'postgres' as const,
          url: pg.url,
          schema: 'app',
          maxConnections: 3,
        }),
      }),
      { logger: false, abortOnError: false },
    );
    const store = sut.get(EventStore);
    const lease = (await sut.get(LeaseStore).claim('task_1', 'me', { ttlMs: 10_000 }))!;
    await store.append(
      'task_1',
      [{ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 'sess_1' } } as never],
      { expected: 'no_stream', lease },
    );
    expect(await sut.get(TaskStateStore).get('task_1')).toMatchObject({ status: 'queued' });
    await expect(
      store.append(
        'task_1',
        [{ type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index: 0, delta: 'd' } } as never],
        {
          expected: 1,
          lease: { ...lease, epoch: lease.epoch - 1 },
        },
      ),
    ).rejects.toBeInstanceOf(LeaseLostError);
    const db = sut.get<Kysely<unknown>>(STORAGE_DB);
    expect((await sql<{ n: number }>`SELECT count(*)::int AS n FROM app.events`.execute(db)).rows).toEqual([
      { n: 1 },
    ]);
    await sut.close();
    await expect(sql`SELECT 1`.execute(db)).rejects.toThrow();
  });
});
