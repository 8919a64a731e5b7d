import {
  ConcurrencyError,
  IdempotencyConflictError,
  IllegalStateError,
  LeaseLostError,
  NewEvent,
  RuntimeEvent,
  ValidationError,
  currentSchemaVersion,
} from '@runledger/contracts';
import { firstValueFrom, take, toArray } from 'rxjs';
import { EventBus } from '../event-bus';
import { EventStore, LeaseToken, RawEvent } from '../event-store';
import { chunks, outputChunk, taskCompleted, taskReceived } from './events';

/** A fresh, empty store per test; `dispose` removes whatever it created. */
export interface ConformanceSubject {
  store: EventStore;
  /** make `lease` the task's current lease, as a claim would (the row the store fences appends against) */
  setLease(taskId: string, lease: LeaseToken): Promise<void>;
  dispose?: () => Promise<void>;
}

/**
 * The behaviour every EventStore adapter must show. Run it from a two-line
 * spec per adapter: `runEventStoreConformance('X', async () => ({ store: new X() }))`.
 */
export function runEventStoreConformance(name: string, factory: () => Promise<ConformanceSubject>): void {
  describe(`EventStore conformance: ${name}`, () => {
    let sut: EventStore;
    let subject: ConformanceSubject;

    beforeEach(async () => {
      subject = await factory();
      sut = subject.store;
    });
    afterEach(async () => {
      await sut.close();
      await subject.dispose?.();
    });

    describe('append', () => {
      it('numbers a stream gap-free from 1 and positions strictly increasing across streams', async () => {
        await sut.append('t1', [taskReceived(), ...chunks(2)], { expected: 'no_stream' });
        await sut.append('t2', [taskReceived()], { expected: 'no_stream' });
        await sut.append('t1', chunks(2, 2), { expected: 3 });

        const t1 = await sut.readStream('t1');
        expect(t1.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5]);
        const all = await sut.readAll();
        expect(all).toHaveLength(6);
        for (let i = 1; i < all.length; i++) expect(all[i].position).toBeGreaterThan(all[i - 1].position);
        expect(all.map((e) => e.task_id)).toEqual(['t1', 't1', 't1', 't2', 't1', 't1']);
        expect(await sut.head()).toEqual({ position: all[5].position, event_count: 6 });
      });

      it('stores and serves each event with its schema version, on every read path', async () => {
        const appended = await sut.append('t1', [taskReceived(), outputChunk(0)], { expected: 'no_stream' });
        const expected = appended.events.map((e) => currentSchemaVersion(e.type));
        expect(appended.events.map((e) => e.schema_version)).toEqual(expected);
        expect((await sut.readStream('t1')).map((e) => e.schema_version)).toEqual(expected);
        expect((await sut.readAll()).map((e) => e.schema_version)).toEqual(expected);
        const raw = await sut.readStreamRaw('t1');
        expect(raw.map((r) => (JSON.parse(r.json) as RuntimeEvent).schema_version)).toEqual(expected);
      });

      it('returns positions, stored envelopes and the next expected sequence', async () => {
        const res = await sut.append('t1', [taskReceived({}, 'ses_a'), outputChunk(0)], {
          expected: 'no_stream',
        });
        expect(res.nextExpectedSequence).toBe(2);
        expect(res.positions).toEqual(res.events.map((e) => e.position));
        const [first, second] = res.events;
        expect(first.event_id).toMatch(/^evt_/);
        expect(first.session_id).toBe('ses_a');
        expect(second.session_id).toBe('ses_a');
        expect(first.correlation_id).toBe('t1');
        expect(first.causation_id).toBeNull();
        expect(Date.parse(first.created_at)).not.toBeNaN();
        expect(first.payload).toMatchObject({ accept_checks: [], budgets: {}, source: 'api' });
        expect(await sut.readStream('t1')).toEqual(res.events);
      });

      it('keeps caller-supplied envelope fields and inherits the session of the first event', async () => {
        await sut.append(
          't1',
          [taskReceived({ session_id: 'ses_x', correlation_id: 'corr', event_id: 'evt_given' })],
          { expected: 'no_stream' },
        );
        const res = await sut.append('t1', [outputChunk(0, { causation_id: 'evt_given' })], { expected: 1 });
        expect(res.events[0]).toMatchObject({
          session_id: 'ses_x',
          causation_id: 'evt_given',
          correlation_id: 't1',
        });
        expect((await sut.readStream('t1'))[0]).toMatchObject({
          event_id: 'evt_given',
          correlation_id: 'corr',
        });
      });

      it('defaults the session to the task id when nothing names one', async () => {
        const res = await sut.append('t9', [outputChunk(0)], { expected: 'any' });
        expect(res.events[0].session_id).toBe('t9');
      });

      it.each([
        ['no_stream on a new stream', 'no_stream' as const, 0, true],
        ['no_stream on an existing stream', 'no_stream' as const, 2, false],
        ['stream_exists on a new stream', 'stream_exists' as const, 0, false],
        ['stream_exists on an existing stream', 'stream_exists' as const, 2, true],
        ['any on a new stream', 'any' as const, 0, true],
        ['any on an existing stream', 'any' as const, 2, true],
        ['0 on a new stream', 0, 0, true],
        ['the current sequence', 2, 2, true],
        ['a stale sequence', 1, 2, false],
        ['a future sequence', 3, 2, false],
      ])('expected %s', async (_label, expected, existing, accepted) => {
        if (existing > 0) await sut.append('t1', chunks(existing), { expected: 'no_stream' });
        const attempt = sut.append('t1', [outputChunk(99)], { expected });
        if (accepted) {
          await expect(attempt).resolves.toMatchObject({ nextExpectedSequence: existing + 1 });
        } else {
          await expect(attempt).rejects.toBeInstanceOf(ConcurrencyError);
          expect(await sut.streamVersion('t1')).toBe(existing);
        }
      });

      it('closes a task stream at its final event: a later append is IllegalStateError and writes nothing', async () => {
        const final = { ...taskCompleted(), event_id: 'evt_final' } as NewEvent;
        await sut.append('t1', [taskReceived(), final], { expected: 'no_stream' });
        const before = await sut.head();
        // with the right expected sequence too: a second runner that caught up must not write past the end
        await expect(sut.append('t1', [outputChunk(0)], { expected: 2 })).rejects.toBeInstanceOf(
          IllegalStateError,
        );
        await expect(sut.append('t1', [outputChunk(0)], { expected: 'any' })).rejects.toThrow(
          'task t1 already ended (TASK_COMPLETED at sequence 2)',
        );
        // a stale writer still learns about the conflict first
        await expect(sut.append('t1', [outputChunk(0)], { expected: 1 })).rejects.toBeInstanceOf(
          ConcurrencyError,
        );
        // a retry of the final batch itself is still idempotent
        await expect(sut.append('t1', [final], { expected: 1 })).resolves.toMatchObject({ positions: [2] });
        // nothing may follow a final event inside one batch either
        await expect(
          sut.append('t2', [taskReceived(), taskCompleted(), outputChunk(0)], { expected: 'no_stream' }),
        ).rejects.toBeInstanceOf(ValidationError);
        expect(await sut.head()).toEqual(before);
      });

      it('writes nothing on ConcurrencyError, for the whole batch', async () => {
        await sut.append('t1', chunks(2), { expected: 'no_stream' });
        const before = await sut.head();
        await expect(sut.append('t1', chunks(5, 10), { expected: 1 })).rejects.toMatchObject({ actual: 2 });
        expect(await sut.head()).toEqual(before);
        expect(await sut.readStream('t1')).toHaveLength(2);
      });

      it.each([
        ['an unknown type', { type: 'TASK_EXPLODED', payload: {} }],
        [
          'a payload of the wrong shape',
          { type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index: 'zero', delta: 1 } },
        ],
        ['a missing payload', { type: 'TASK_RECEIVED' }],
        [
          'a secret value on SECRET_PROVIDED',
          {
            type: 'SECRET_PROVIDED',
            payload: { request_id: 'r', call_id: 'c', secret_name: 's', value: 'hunter2' },
          },
        ],
      ])('rejects %s before writing any event of the batch', async (_label, bad) => {
        const batch = [taskReceived(), bad as unknown as NewEvent, outputChunk(1)];
        await expect(sut.append('t1', batch, { expected: 'any' })).rejects.toBeInstanceOf(ValidationError);
        expect(await sut.head()).toEqual({ position: 0, event_count: 0 });
      });

      it('rejects an empty batch, a bad expected value and an id repeated within a batch', async () => {
        await expect(sut.append('t1', [], { expected: 'any' })).rejects.toBeInstanceOf(ValidationError);
        await expect(sut.append('t1', [outputChunk(0)], { expected: -1 })).rejects.toBeInstanceOf(
          ValidationError,
        );
        await expect(
          sut.append('t1', [outputChunk(0, { event_id: 'e1' }), outputChunk(1, { event_id: 'e1' })], {
            expected: 'any',
          }),
        ).rejects.toBeInstanceOf(ValidationError);
        expect((await sut.head()).event_count).toBe(0);
      });

      it.each([
        ['a NUL in the task id', 't\u0000', {}],
        ['an unpaired surrogate in the correlation id', 't1', { correlation_id: 'c\ud800' }],
        ['a NUL in the event id', 't1', { event_id: 'e\u0000' }],
      ])('rejects %s with ValidationError, writing nothing', async (_label, taskId, envelope) => {
        await expect(
          sut.append(taskId, [taskReceived(envelope)], { expected: 'no_stream' }),
        ).rejects.toBeInstanceOf(ValidationError);
        expect((await sut.head()).event_count).toBe(0);
      });

      it('is idempotent by event_id: a retried batch returns the original positions and writes nothing', async () => {
        const batch = [taskReceived({ event_id: 'evt_a' }), outputChunk(0, { event_id: 'evt_b' })];
        const first = await sut.append('t1', batch, { expected: 'no_stream' });
        await sut.append('t1', [outputChunk(1)], { expected: 2 });
        // the retry carries a stale expected version: the stored originals win over the check
        const retry = await sut.append('t1', batch, { expected: 'no_stream' });
        expect(retry.positions).toEqual(first.positions);
        expect(retry.events).toEqual(first.events);
        expect(retry.nextExpectedSequence).toBe(3);
        expect((await sut.head()).event_count).toBe(3);
      });

      it('refuses a batch that reuses some stored event ids, or ids of another stream', async () => {
        await sut.append('t1', [outputChunk(0, { event_id: 'evt_a' })], { expected: 'no_stream' });
        await expect(
          sut.append('t1', [outputChunk(0, { event_id: 'evt_a' }), outputChunk(1)], { expected: 'any' }),
        ).rejects.toBeInstanceOf(IdempotencyConflictError);
        await expect(
          sut.append('t2', [outputChunk(0, { event_id: 'evt_a' })], { expected: 'any' }),
        ).rejects.toBeInstanceOf(IdempotencyConflictError);
        expect((await sut.head()).event_count).toBe(1);
      });
    });

    describe('fencing', () => {
      const current = { owner: 'host-a:1:aa', epoch: 3 };

      it("appends with the task's current lease", async () => {
        await subject.setLease('t1', current);
        await sut.append('t1', [taskReceived()], { expected: 'no_stream', lease: current });
        await sut.append('t1', chunks(2), { expected: 1, lease: { ...current } });
        expect(await sut.streamVersion('t1')).toBe(3);
      });

      it.each([
        ['an older epoch of the same owner', { owner: 'host-a:1:aa', epoch: 2 }],
        ['the same epoch of another owner', { owner: 'host-b:2:bb', epoch: 3 }],
        ['a newer epoch than the row', { owner: 'host-a:1:aa', epoch: 4 }],
      ])('refuses %s with LeaseLostError and writes nothing', async (_label, stale) => {
        await subject.setLease('t1', current);
        await sut.append('t1', [taskReceived()], { expected: 'no_stream', lease: current });
        const before = await sut.head();
        const attempt = sut.append('t1', chunks(3), { expected: 1, lease: stale });
        await expect(attempt).rejects.toBeInstanceOf(LeaseLostError);
        await expect(attempt).rejects.toMatchObject({ taskId: 't1', held: stale, current });
        expect(await sut.head()).toEqual(before);
        expect(await sut.readStream('t1')).toHaveLength(1);
      });

      it('refuses a lease on a task that has none, and says a fenced writer lost the task before that the stream moved', async () => {
        await expect(
          sut.append('t1', [taskReceived()], { expected: 'no_stream', lease: current }),
        ).rejects.toMatchObject({
          current: null,
        });
        await sut.append('t2', [taskReceived(), ...chunks(2)], { expected: 'no_stream' });
        await subject.setLease('t2', { owner: 'host-b:2:bb', epoch: 4 });
        // the new owner moved the stream on; the old one, still expecting 1, hears of the lease
        await expect(sut.append('t2', chunks(1), { expected: 1, lease: current })).rejects.toBeInstanceOf(
          LeaseLostError,
        );
        expect((await sut.head()).event_count).toBe(3);
      });

      it('does not fence an append without a lease, whoever holds the task', async () => {
        await subject.setLease('t1', current);
        await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
        await sut.append('t1', chunks(1), { expected: 'any' });
        expect(await sut.streamVersion('t1')).toBe(2);
      });

      it('publishes nothing for a fenced append', async () => {
        const bus = new EventBus(sut);
        const seen: RuntimeEvent[] = [];
        const sub = bus.events$.subscribe((e) => seen.push(e));
        await subject.setLease('t1', current);
        await sut.append('t1', [taskReceived()], { expected: 'no_stream', lease: current });
        await expect(
          sut.append('t1', chunks(1), { expected: 1, lease: { ...current, epoch: 1 } }),
        ).rejects.toBeInstanceOf(LeaseLostError);
        sub.unsubscribe();
        bus.close();
        expect(seen.map((e) => e.type)).toEqual(['TASK_RECEIVED']);
      });
    });

    describe('appends arriving together (group commit)', () => {
      it('concurrent appends to different streams all commit, each stream gap-free, positions unique', async () => {
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            sut.append(`t${i}`, [taskReceived(), ...chunks(2)], { expected: 'no_stream' }),
          ),
        );
        const positions = results.flatMap((r) => r.positions);
        expect(new Set(positions).size).toBe(60);
        for (const [i, r] of results.entries()) {
          expect(r.events.map((e) => [e.task_id, e.sequence])).toEqual([
            [`t${i}`, 1],
            [`t${i}`, 2],
            [`t${i}`, 3],
          ]);
          expect(r.positions).toEqual([r.positions[0], r.positions[0] + 1, r.positions[0] + 2]);
        }
        expect(await sut.head()).toEqual({ position: Math.max(...positions), event_count: 60 });
      });

      it('appends to one stream in the same tick see each other: each expects the sequence the one before left', async () => {
        await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) => sut.append('t1', [outputChunk(i)], { expected: i + 1 })),
        );
        expect(results.map((r) => r.nextExpectedSequence)).toEqual(
          Array.from({ length: 10 }, (_, i) => i + 2),
        );
        const stream = await sut.readStream('t1');
        expect(stream.map((e) => e.sequence)).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
        expect(stream.slice(1).map((e) => (e.payload as { index: number }).index)).toEqual(
          Array.from({ length: 10 }, (_, i) => i),
        );
      });

      it('one failing append among many rejects only its caller and writes nothing of its own', async () => {
        await sut.append('ended', [taskReceived(), taskCompleted()], { expected: 'no_stream' });
        await sut.append('stale', chunks(2), { expected: 'no_stream' });
        await sut.append('owner', [outputChunk(0, { event_id: 'evt_taken' })], { expected: 'no_stream' });
        const before = (await sut.head()).event_count;
        const settled = await Promise.allSettled([
          sut.append('a', [taskReceived(), outputChunk(0)], { expected: 'no_stream' }),
          sut.append('stale', [outputChunk(9, { event_id: 'evt_stale' })], { expected: 1 }),
          sut.append('b', [taskReceived()], { expected: 'no_stream' }),
          sut.append('ended', [outputChunk(9, { event_id: 'evt_late' })], { expected: 2 }),
          sut.append('c', [outputChunk(0, { event_id: 'evt_taken' })], { expected: 'any' }),
          sut.append('a', [outputChunk(1)], { expected: 2 }),
          sut.append('a', [outputChunk(2, { event_id: 'evt_race' })], { expected: 2 }),
        ]);
        expect(settled.map((s) => s.status)).toEqual([
          'fulfilled',
          'rejected',
          'fulfilled',
          'rejected',
          'rejected',
          'fulfilled',
          'rejected',
        ]);
        const reasons = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as Error] : []));
        expect(reasons[0]).toBeInstanceOf(ConcurrencyError);
        expect(reasons[1]).toBeInstanceOf(IllegalStateError);
        expect(reasons[2]).toBeInstanceOf(IdempotencyConflictError);
        expect(reasons[3]).toBeInstanceOf(ConcurrencyError);
        const all = await sut.readAll();
        for (const id of ['evt_stale', 'evt_late', 'evt_race'])
          expect(all.some((e) => e.event_id === id)).toBe(false);
        expect(await sut.streamVersion('c')).toBe(0);
        expect((await sut.readStream('a')).map((e) => e.sequence)).toEqual([1, 2, 3]);
        // refused appends leave no hole: positions stay dense and the head counts what is stored
        expect(all.map((e) => e.position)).toEqual(Array.from({ length: all.length }, (_, i) => i + 1));
        expect(all).toHaveLength(before + 4);
        expect(await sut.head()).toEqual({ position: all.length, event_count: all.length });
      });

      it('a caller resumes only after its events are stored and published: listeners see every commit once, in position order', async () => {
        const heard: number[] = [];
        const detach = sut.onCommitted((events) => heard.push(...events.map((e) => e.position)));
        const checks = Array.from({ length: 12 }, (_, i) =>
          sut.append(`t${i % 4}`, [outputChunk(i)], { expected: 'any' }).then(async (res) => {
            // by the time the writer hears back, its events were published and are readable
            expect(heard).toEqual(expect.arrayContaining(res.positions));
            const stored = await sut.readStream(`t${i % 4}`);
            expect(stored.map((e) => e.position)).toEqual(expect.arrayContaining(res.positions));
          }),
        );
        await Promise.all(checks);
        detach();
        expect(heard).toHaveLength(12);
        expect([...heard].sort((a, b) => a - b)).toEqual(heard);
        expect(new Set(heard).size).toBe(12);
      });
    });

    describe('read', () => {
      beforeEach(async () => {
        await sut.append('t1', [taskReceived(), ...chunks(4)], { expected: 'no_stream' });
        await sut.append('t2', [taskReceived(), taskCompleted()], { expected: 'no_stream' });
        await sut.append('t1', [taskCompleted()], { expected: 5 });
      });

      it('readStream honours after_seq and limit', async () => {
        expect((await sut.readStream('t1', { after_seq: 2, limit: 2 })).map((e) => e.sequence)).toEqual([
          3, 4,
        ]);
        expect((await sut.readStream('t1', { after_seq: 5 })).map((e) => e.type)).toEqual(['TASK_COMPLETED']);
        expect(await sut.readStream('t1', { after_seq: 6 })).toEqual([]);
        expect(await sut.readStream('missing')).toEqual([]);
        expect(await sut.streamVersion('t1')).toBe(6);
        expect(await sut.streamVersion('missing')).toBe(0);
      });

      it('readAll honours after_position, limit, types and task_id', async () => {
        const all = await sut.readAll();
        expect(all).toHaveLength(8);
        const after = await sut.readAll({ after_position: all[2].position, limit: 3 });
        expect(after.map((e) => e.position)).toEqual(all.slice(3, 6).map((e) => e.position));
        const finals = await sut.readAll({ types: ['TASK_COMPLETED'] });
        expect(finals.map((e) => e.task_id)).toEqual(['t2', 't1']);
        const t2 = await sut.readAll({ task_id: 't2', types: ['TASK_RECEIVED', 'TASK_COMPLETED'], limit: 1 });
        expect(t2.map((e) => [e.task_id, e.type])).toEqual([['t2', 'TASK_RECEIVED']]);
        expect(await sut.readAll({ after_position: all[7].position })).toEqual([]);
      });

      it('readStreamRaw and readAllRaw give the events of readStream and readAll as JSON.stringify writes them', async () => {
        // text a JSON encoder must escape, in the envelope and the payload
        const odd = 'quote " backslash \\ newline \n tab \t nul \u0000 lone \ud800 emoji 😀 é / <';
        // ids are text columns: NUL and unpaired surrogates are refused there (see the validation cases)
        const oddId = 'quote " backslash \\ newline \n tab \t emoji 😀 é / <';
        await sut.append('t3', [taskReceived({ correlation_id: oddId, causation_id: oddId }, oddId)], {
          expected: 'no_stream',
        });
        await sut.append('t3', [outputChunk(0, { payload: { call_id: odd, index: 0, delta: odd } })], {
          expected: 1,
        });
        const expectRaw = (raw: readonly RawEvent[], events: readonly RuntimeEvent[]) =>
          expect(raw).toEqual(
            events.map((e) => ({
              position: e.position,
              sequence: e.sequence,
              task_id: e.task_id,
              type: e.type,
              json: JSON.stringify(e),
            })),
          );

        expectRaw(await sut.readStreamRaw('t3'), await sut.readStream('t3'));
        expectRaw(
          await sut.readStreamRaw('t1', { after_seq: 2, limit: 3 }),
          await sut.readStream('t1', { after_seq: 2, limit: 3 }),
        );
        expectRaw(await sut.readAllRaw(), await sut.readAll());
        const filter = { after_position: 2, limit: 4, types: ['TASK_COMPLETED', 'OUTPUT_CHUNK'] } as const;
        expectRaw(await sut.readAllRaw(filter), await sut.readAll(filter));
        expect(await sut.readStreamRaw('missing')).toEqual([]);
      });

      it("readHeads gives readAll's events without their payloads, under the same filters", async () => {
        const heads = (events: readonly RuntimeEvent[]) =>
          events.map(({ position, sequence, task_id, type }) => ({ position, sequence, task_id, type }));
        expect(await sut.readHeads()).toEqual(heads(await sut.readAll()));
        for (const filter of [
          { after_position: 2, limit: 4 },
          { types: ['TASK_RECEIVED', 'TASK_COMPLETED'] as const },
          { after_position: 3, limit: 2, types: ['OUTPUT_CHUNK'] as const },
        ]) {
          const got = await sut.readHeads(filter);
          expect(got).toEqual(heads(await sut.readAll(filter)));
          for (const h of got)
            expect(Object.keys(h).sort()).toEqual(['position', 'sequence', 'task_id', 'type']);
        }
        expect(await sut.readHeads({ after_position: (await sut.head()).position })).toEqual([]);
      });

      it('readWholeStream pages through a stream', async () => {
        expect((await sut.readWholeStream('t1', 2)).map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
      });
    });

    describe('EventBus', () => {
      let bus: EventBus;
      beforeEach(() => {
        bus = new EventBus(sut);
      });
      afterEach(() => bus.close());

      it('publishes only committed events, after the commit', async () => {
        const seen: RuntimeEvent[] = [];
        const sub = bus.events$.subscribe((event) => seen.push(event));
        await sut.append('t1', [taskReceived()], { expected: 'no_stream' });
        await expect(sut.append('t1', [outputChunk(0)], { expected: 0 })).rejects.toBeInstanceOf(
          ConcurrencyError,
        );
        await expect(
          sut.append('t1', [{ type: 'NOPE', payload: {} } as unknown as NewEvent], { expected: 'any' }),
        ).rejects.toBeInstanceOf(ValidationError);
        sub.unsubscribe();
        expect(seen.map((e) => e.type)).toEqual(['TASK_RECEIVED']);
      });

      it('a listener sees the event already readable from the store', async () => {
        const readable: Promise<number>[] = [];
        const sub = bus.events$.subscribe((e) =>
          readable.push(sut.readStream(e.task_id).then((s) => s.length)),
        );
        await sut.append('t1', [taskReceived(), outputChunk(0)], { expected: 'no_stream' });
        sub.unsubscribe();
        expect(await Promise.all(readable)).toEqual([2, 2]);
      });

      it('a failing commit listener does not fail the append', async () => {
        const detach = sut.onCommitted(() => {
          throw new Error('listener bug');
        });
        const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
        await expect(sut.append('t1', [taskReceived()], { expected: 'no_stream' })).resolves.toBeDefined();
        detach();
        expect(warn).toHaveBeenCalledTimes(1);
        warn.mockRestore();
        expect(await sut.streamVersion('t1')).toBe(1);
      });

      it('subscribe on a task replays then continues live, no gap and no duplicate at the seam', async () => {
        await sut.append('t1', [taskReceived(), ...chunks(3)], { expected: 'no_stream' });
        await sut.append('t2', [taskReceived()], { expected: 'no_stream' });
        const got = firstValueFrom(bus.subscribe({ task_id: 't1', after_seq: 1 }).pipe(take(7), toArray()));
        // appended while the replay is in flight: must appear exactly once, in order
        await sut.append('t1', chunks(2, 3), { expected: 4 });
        await sut.append('t2', [outputChunk(0)], { expected: 1 });
        await new Promise((r) => setImmediate(r));
        await sut.append('t1', chunks(2, 5), { expected: 6 });
        const events = await got;
        expect(events.map((e) => e.sequence)).toEqual([2, 3, 4, 5, 6, 7, 8]);
        expect(events.every((e) => e.task_id === 't1')).toBe(true);
      });

      it('subscribe on the global log replays from a position, filters types, then goes live', async () => {
        const first = await sut.append('t1', [taskReceived(), ...chunks(2)], { expected: 'no_stream' });
        const got = firstValueFrom(
          bus
            .subscribe({ after_position: first.positions[0], types: ['OUTPUT_CHUNK', 'TASK_COMPLETED'] })
            .pipe(take(4), toArray()),
        );
        await sut.append('t2', [taskReceived(), outputChunk(0)], { expected: 'no_stream' });
        await sut.append('t1', [taskCompleted()], { expected: 3 });
        const events = await got;
        expect(events.map((e) => [e.task_id, e.type])).toEqual([
          ['t1', 'OUTPUT_CHUNK'],
          ['t1', 'OUTPUT_CHUNK'],
          ['t2', 'OUTPUT_CHUNK'],
          ['t1', 'TASK_COMPLETED'],
        ]);
        for (let i = 1; i < events.length; i++)
          expect(events[i].position).toBeGreaterThan(events[i - 1].position);
      });

      it('subscribe replays across several pages while writers keep appending', async () => {
        await sut.append('t1', chunks(1200), { expected: 'no_stream' });
        const got = firstValueFrom(bus.subscribe({ task_id: 't1' }).pipe(take(1500), toArray()));
        for (let i = 0; i < 3; i++) {
          await sut.append('t1', chunks(100, 1200 + i * 100), { expected: 1200 + i * 100 });
          await new Promise((r) => setImmediate(r));
        }
        const seqs = (await got).map((e) => e.sequence);
        expect(seqs).toEqual(Array.from({ length: 1500 }, (_, i) => i + 1));
      });
    });
  });
}
