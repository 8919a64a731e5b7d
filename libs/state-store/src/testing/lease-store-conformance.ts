import { setTimeout as sleep } from 'node:timers/promises';
import { LeaseLostError, NewEvent } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { LeaseStore } from '../lease-store';

/** A fresh, empty lease store per test, and an event store fencing its appends against the same leases. */
export interface LeaseStoreSubject {
  leases: LeaseStore;
  events: EventStore;
  dispose?: () => Promise<void>;
}

const A = 'host-a:101:aaaa';
const B = 'host-b:202:bbbb';
const LONG = 60_000;
/** short enough to wait out in a test, long enough that a slow machine does not expire it between two statements */
const SHORT = 150;
/** slack for the database's clock against this process's (PostgreSQL may run elsewhere) */
const SLACK = 2_000;

const received = { type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } } as NewEvent;
const chunk = (index: number) =>
  ({ type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index, delta: 'd' } }) as NewEvent;

/**
 * The behaviour every LeaseStore adapter must show, run from a short spec per
 * adapter: `runLeaseStoreConformance('X', async () => ({ leases, events }))`.
 */
export function runLeaseStoreConformance(name: string, factory: () => Promise<LeaseStoreSubject>): void {
  describe(`LeaseStore conformance: ${name}`, () => {
    let sut: LeaseStore;
    let subject: LeaseStoreSubject;

    beforeEach(async () => {
      subject = await factory();
      sut = subject.leases;
    });
    afterEach(async () => {
      await subject.events.close();
      await subject.dispose?.();
    });

    it('claims a task nobody holds at epoch 1, expiring ttl from now', async () => {
      const before = Date.now();
      const lease = await sut.claim('t1', A, { ttlMs: LONG });
      expect(lease).toMatchObject({ task_id: 't1', owner: A, epoch: 1 });
      expect(lease!.expires_at).toBeGreaterThanOrEqual(before + LONG - SLACK);
      expect(lease!.expires_at).toBeLessThanOrEqual(Date.now() + LONG + SLACK);
      expect(await sut.get('t1')).toEqual(lease);
      expect(await sut.get('t2')).toBeNull();
    });

    it('never hands a live lease to another claim, nor again to its owner', async () => {
      const held = await sut.claim('t1', A, { ttlMs: LONG });
      expect(await sut.claim('t1', B, { ttlMs: LONG })).toBeNull();
      expect(await sut.claim('t1', A, { ttlMs: LONG })).toBeNull();
      expect(await sut.get('t1')).toEqual(held);
    });

    it('lets exactly one of several racing claims win', async () => {
      const owners = ['o1', 'o2', 'o3', 'o4', 'o5'];
      const results = await Promise.all(owners.map((o) => sut.claim('t1', o, { ttlMs: LONG })));
      const won = results.filter((r) => r !== null);
      expect(won).toHaveLength(1);
      expect(await sut.get('t1')).toEqual(won[0]);
    });

    it('hands an expired lease to the next claim with the epoch bumped; its old owner then finds it lost', async () => {
      const first = (await sut.claim('t1', A, { ttlMs: SHORT }))!;
      await sleep(SHORT + 50);
      const second = await sut.claim('t1', B, { ttlMs: LONG });
      expect(second).toMatchObject({ owner: B, epoch: 2 });
      expect(await sut.renew(A, [first], LONG)).toEqual(['t1']);
      expect(await sut.get('t1')).toEqual(second);
    });

    it("keeps an expired lease its owner's until someone claims it: renew revives it", async () => {
      const held = (await sut.claim('t1', A, { ttlMs: SHORT }))!;
      await sleep(SHORT + 50);
      expect(await sut.claimable(['t1'])).toEqual(['t1']);
      expect(await sut.renew(A, [held], LONG)).toEqual([]);
      expect(await sut.claimable(['t1'])).toEqual([]);
      expect(await sut.claim('t1', B, { ttlMs: LONG })).toBeNull();
    });

    it('force takes a live lease, bumping the epoch', async () => {
      const held = (await sut.claim('t1', A, { ttlMs: LONG }))!;
      const stolen = await sut.claim('t1', B, { ttlMs: LONG, force: true });
      expect(stolen).toMatchObject({ owner: B, epoch: held.epoch + 1 });
      expect(await sut.renew(A, [held], LONG)).toEqual(['t1']);
    });

    it("renew extends the owner's leases and names the ones it lost", async () => {
      const t1 = (await sut.claim('t1', A, { ttlMs: SHORT }))!;
      const t2 = (await sut.claim('t2', A, { ttlMs: LONG }))!;
      const t3 = (await sut.claim('t3', A, { ttlMs: LONG }))!;
      await sut.claim('t2', B, { ttlMs: LONG, force: true });
      await sut.release('t3', t3);
      const before = Date.now();
      expect((await sut.renew(A, [t1, t2, t3], LONG)).sort()).toEqual(['t2', 't3']);
      expect((await sut.get('t1'))!.expires_at).toBeGreaterThanOrEqual(before + LONG - SLACK);
      await sleep(SHORT + 50);
      expect(await sut.claim('t1', B, { ttlMs: LONG })).toBeNull();
      expect(await sut.renew(A, [], LONG)).toEqual([]);
    });

    it('renew by another owner, or with another epoch, extends nothing', async () => {
      const held = (await sut.claim('t1', A, { ttlMs: LONG }))!;
      expect(await sut.renew(B, [held], LONG)).toEqual(['t1']);
      expect(await sut.renew(A, [{ ...held, epoch: held.epoch + 1 }], LONG)).toEqual(['t1']);
      expect(await sut.get('t1')).toEqual(held);
    });

    it("release drops only the current token's lease; the next claim bumps the epoch", async () => {
      const first = (await sut.claim('t1', A, { ttlMs: SHORT }))!;
      await sleep(SHORT + 50);
      const second = (await sut.claim('t1', B, { ttlMs: LONG }))!;
      await sut.release('t1', first);
      expect(await sut.get('t1')).toEqual(second);
      await sut.release('t1', second);
      expect(await sut.get('t1')).toBeNull();
      expect(await sut.claimable(['t1'])).toEqual(['t1']);
      expect(await sut.renew(B, [second], LONG)).toEqual(['t1']);
      expect(await sut.claim('t1', A, { ttlMs: LONG })).toMatchObject({ owner: A, epoch: 3 });
    });

    it('claimable: tasks with no lease, an expired or a released one; never a live one', async () => {
      await sut.claim('live', A, { ttlMs: LONG });
      await sut.claim('expired', A, { ttlMs: SHORT });
      const released = (await sut.claim('released', A, { ttlMs: LONG }))!;
      await sut.release('released', released);
      await sleep(SHORT + 50);
      expect(await sut.claimable(['live', 'expired', 'released', 'never'])).toEqual([
        'expired',
        'released',
        'never',
      ]);
      expect(await sut.claimable([])).toEqual([]);
      const many = Array.from({ length: 1500 }, (_, i) => `t${i}`);
      await sut.claim('t1499', A, { ttlMs: LONG });
      expect(await sut.claimable(many)).toEqual(many.slice(0, 1499));
    });

    it("fences the event store: a claim cuts off the previous holder's appends, not the new one's", async () => {
      const first = (await sut.claim('t1', A, { ttlMs: LONG }))!;
      const token = (l: typeof first) => ({ owner: l.owner, epoch: l.epoch });
      await subject.events.append('t1', [received], { expected: 'no_stream', lease: token(first) });
      const second = (await sut.claim('t1', B, { ttlMs: LONG, force: true }))!;
      await expect(
        subject.events.append('t1', [chunk(0)], { expected: 1, lease: token(first) }),
      ).rejects.toBeInstanceOf(LeaseLostError);
      await subject.events.append('t1', [chunk(0)], { expected: 1, lease: token(second) });
      // released, then claimed again: the old epochs stay fenced off
      await sut.release('t1', second);
      const third = (await sut.claim('t1', A, { ttlMs: LONG }))!;
      await expect(
        subject.events.append('t1', [chunk(1)], { expected: 2, lease: token(second) }),
      ).rejects.toBeInstanceOf(LeaseLostError);
      await subject.events.append('t1', [chunk(1)], { expected: 2, lease: token(third) });
      expect(await subject.events.streamVersion('t1')).toBe(3);
    });
  });
}
