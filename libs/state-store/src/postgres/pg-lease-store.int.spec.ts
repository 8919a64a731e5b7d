import { LeaseLostError, ValidationError } from '@runledger/contracts';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { PostgresStorage } from '../storage';
import { TempStorage, createTempPgStorage } from '../testing/temp-storage';
import { PgLeaseStore } from './pg-lease-store';

const received = { type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } } as never;
const chunk = { type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index: 0, delta: 'd' } } as never;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describePostgres('PgLeaseStore', () => {
  const pg = useTestPostgres();
  let tmp: TempStorage<PostgresStorage>;
  let sut: PgLeaseStore;

  beforeEach(async () => {
    tmp = await createTempPgStorage(pg);
    sut = new PgLeaseStore(tmp.storage);
  });
  afterEach(() => tmp.dispose());

  it('a claim takes a free task at epoch 1 and is refused while a live owner holds it', async () => {
    const lease = await sut.claim('t1', 'a', { ttlMs: 20_000 });
    expect(lease).toMatchObject({ task_id: 't1', owner: 'a', epoch: 1 });
    expect(lease!.expires_at).toBeGreaterThan(Date.now() + 15_000);
    expect(await sut.claim('t1', 'b', { ttlMs: 20_000 })).toBeNull();
    expect(await sut.claim('t1', 'a', { ttlMs: 20_000 })).toBeNull();
    expect(await sut.get('t1')).toEqual(lease);
  });

  it('an expired lease is claimable and the claim bumps the epoch; force takes a live one', async () => {
    await sut.claim('t1', 'a', { ttlMs: 50 });
    await sut.claim('t2', 'a', { ttlMs: 20_000 });
    expect(await sut.claimable(['t1', 't2', 't3'])).toEqual(['t3']);
    await sleep(80);
    expect(await sut.claimable(['t3', 't1', 't2'])).toEqual(['t3', 't1']);
    expect(await sut.claim('t1', 'b', { ttlMs: 20_000 })).toMatchObject({ owner: 'b', epoch: 2 });
    expect(await sut.claim('t2', 'b', { ttlMs: 20_000, force: true })).toMatchObject({
      owner: 'b',
      epoch: 2,
    });
    expect(await sut.claimable([])).toEqual([]);
  });

  it('renew extends the leases still held at their epoch and names the lost ones', async () => {
    const t1 = (await sut.claim('t1', 'a', { ttlMs: 100 }))!;
    const t2 = (await sut.claim('t2', 'a', { ttlMs: 100 }))!;
    const t3 = (await sut.claim('t3', 'a', { ttlMs: 100 }))!;
    await sut.claim('t2', 'b', { ttlMs: 20_000, force: true });
    await sut.release('t3', t3);
    expect(await sut.renew('a', [t1, t2, t3], 20_000)).toEqual(['t2', 't3']);
    expect((await sut.get('t1'))!.expires_at).toBeGreaterThan(t1.expires_at);
    expect(await sut.get('t2')).toMatchObject({ owner: 'b', epoch: 2 });
    expect(await sut.renew('a', [], 20_000)).toEqual([]);
  });

  it('release drops only the lease of the token given', async () => {
    const old = (await sut.claim('t1', 'a', { ttlMs: 20_000 }))!;
    const current = (await sut.claim('t1', 'b', { ttlMs: 20_000, force: true }))!;
    await sut.release('t1', old);
    expect(await sut.get('t1')).toEqual(current);
    await sut.release('t1', current);
    expect(await sut.get('t1')).toBeNull();
    expect(await sut.claimable(['t1'])).toEqual(['t1']);
  });

  it('fences the event store: after a takeover the old holder cannot append, the new one can', async () => {
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
    const a = (await sut.claim('t1', 'a', { ttlMs: 20_000 }))!;
    await tmp.storage.eventStore.append('t1', [received], { expected: 'no_stream', lease: a });
    // hold the lease row as an append's fencing check does, in a transaction left open
    const client = await tmp.storage.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("SELECT * FROM task_leases WHERE task_id = 't1' FOR SHARE");
      let taken = false;
      const takeover = sut.claim('t1', 'b', { ttlMs: 20_000, force: true }).then((l) => ((taken = true), l));
      await sleep(200);
      expect(taken).toBe(false);
      await client.query('COMMIT');
      expect(await takeover).toMatchObject({ owner: 'b', epoch: 2 });
    } finally {
      client.release();
    }
  });

  it('refuses a ttl that is not a positive integer', async () => {
    await expect(sut.claim('t1', 'a', { ttlMs: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(sut.renew('a', [], -1)).rejects.toBeInstanceOf(ValidationError);
  });
});
