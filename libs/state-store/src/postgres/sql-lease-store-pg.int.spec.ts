import { LeaseLostError } from '@runledger/contracts';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { POSTGRES_NOW_MS, SqlLeaseStore } from '../sql-lease-store';
import { PostgresStorage } from '../storage';
import { runLeaseStoreConformance } from '../testing/lease-store-conformance';
import { TempStorage, createTempPgStorage } from '../testing/temp-storage';

const received = { type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } } as never;
const chunk = { type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index: 0, delta: 'd' } } as never;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describePostgres('SqlLeaseStore on PostgreSQL', () => {
  const pg = useTestPostgres();

  runLeaseStoreConformance('SqlLeaseStore on PostgreSQL', async () => {
    const temp = await createTempPgStorage(pg);
    return {
      leases: new SqlLeaseStore(temp.storage.db, POSTGRES_NOW_MS),
      events: temp.storage.eventStore,
      dispose: temp.dispose,
    };
  });

  describe('with the PostgreSQL storage', () => {
    let tmp: TempStorage<PostgresStorage>;
    beforeEach(async () => {
      tmp = await createTempPgStorage(pg);
    });
    afterEach(() => tmp.dispose());

    it("the storage's leases fence its event store: after a takeover the old holder cannot append, the new one can", async () => {
      const sut = tmp.storage.leases;
      const a = (await sut.claim('t1', 'a', { ttlMs: 20_000 }))!;
      const store = tmp.storage.eventStore;
      await store.append('t1', [received], { expected: 'no_stream', lease: a });
      const b = (await sut.claim('t1', 'b', { ttlMs: 20_000, force: true }))!;
      await expect(store.append('t1', [chunk], { expected: 1, lease: a })).rejects.toBeInstanceOf(
        LeaseLostError,
      );
      await expect(store.append('t1', [chunk], { expected: 1, lease: b })).resolves.toMatchObject({
        nextExpectedSequence: 2,
      });
    });

    it('a takeover waits for an append in flight under the old lease, which commits first', async () => {
      const sut = tmp.storage.leases;
      const a = (await sut.claim('t1', 'a', { ttlMs: 20_000 }))!;
      await tmp.storage.eventStore.append('t1', [received], { expected: 'no_stream', lease: a });
      // hold the lease row as an append's fencing check does, in a transaction left open
      const client = await tmp.storage.pool.connect();
      try {
        await client.query('BEGIN');
        await client.query("SELECT * FROM task_leases WHERE task_id = 't1' FOR SHARE");
        let taken = false;
        const takeover = sut.claim('t1', 'b', { ttlMs: 20_000, force: true }).then((l) => {
          taken = true;
          return l;
        });
        await sleep(200);
        expect(taken).toBe(false);
        await client.query('COMMIT');
        expect(await takeover).toMatchObject({ owner: 'b', epoch: 2 });
      } finally {
        client.release();
      }
    });
  });
});
