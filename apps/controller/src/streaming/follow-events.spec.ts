import { NewEvent } from '@runledger/contracts';
import { EventBus, InMemoryEventStore, RawEvent } from '@runledger/event-store';
import { EventSource, FollowCursor, followEvents } from './follow-events';

const chunk = (index: number): NewEvent =>
  ({ type: 'OUTPUT_CHUNK', payload: { call_id: 'call_1', index, delta: `d${index}` } }) as NewEvent;
const received = (): NewEvent =>
  ({ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 'ses_1' } }) as NewEvent;

function sourceOf(store: InMemoryEventStore, bus: EventBus): EventSource {
  return {
    committed$: bus.events$,
    readStreamRaw: (taskId, o) => store.readStreamRaw(taskId, o),
    readAllRaw: (o) => store.readAllRaw(o),
  };
}

async function appendChunks(store: InMemoryEventStore, taskId: string, n: number) {
  let seq = await store.streamVersion(taskId);
  if (seq === 0)
    seq = (await store.append(taskId, [received()], { expected: 'no_stream' })).nextExpectedSequence;
  for (let i = 0; i < n; i++) {
    seq = (await store.append(taskId, [chunk(i)], { expected: seq })).nextExpectedSequence;
    if (i % 7 === 0) await new Promise((r) => setImmediate(r));
  }
}

describe('followEvents', () => {
  let store: InMemoryEventStore;
  let bus: EventBus;
  beforeEach(() => {
    store = new InMemoryEventStore();
    bus = new EventBus(store);
  });
  afterEach(() => bus.close());

  it.each<[string, (t: string) => FollowCursor, (e: RawEvent) => number]>([
    ['one task from after_seq', (t) => ({ kind: 'task', task_id: t, after_seq: 10 }), (e) => e.sequence],
    ['the global log from after_position', () => ({ kind: 'all', after_position: 10 }), (e) => e.position],
  ])('follows %s across the replay/live seam with no gap and no duplicate', async (_, cursorFor, key) => {
    await appendChunks(store, 'task_a', 300);
    const seen: number[] = [];
    const sut = followEvents(
      sourceOf(store, bus),
      cursorFor('task_a'),
      async (events) => {
        seen.push(...events.map(key));
        if (seen.length % 50 < events.length) await new Promise((r) => setTimeout(r, 1));
      },
      { pageSize: 64, onOverflow: () => fail('overflow'), onError: (e) => fail(e) },
    );
    await appendChunks(store, 'task_a', 200);
    while (seen.length < 491) await new Promise((r) => setTimeout(r, 5));
    sut.stop();
    await sut.done;
    expect(seen).toEqual(Array.from({ length: 491 }, (_, i) => i + 11));
  });

  it('filters the global log by type and task', async () => {
    await appendChunks(store, 'task_a', 5);
    await appendChunks(store, 'task_b', 5);
    const seen: RawEvent[] = [];
    const sut = followEvents(
      sourceOf(store, bus),
      { kind: 'all', after_position: 0, types: ['TASK_RECEIVED'] },
      (events) => void seen.push(...events),
      {
        onOverflow: () => undefined,
        onError: () => undefined,
      },
    );
    await appendChunks(store, 'task_c', 1);
    while (seen.length < 3) await new Promise((r) => setTimeout(r, 5));
    sut.stop();
    expect(seen.map((e) => e.task_id)).toEqual(['task_a', 'task_b', 'task_c']);
  });

  it("ends after the consumer says 'stop'", async () => {
    await appendChunks(store, 'task_a', 10);
    const seen: number[] = [];
    const sut = followEvents(
      sourceOf(store, bus),
      { kind: 'task', task_id: 'task_a', after_seq: 0 },
      (events) => {
        for (const e of events) {
          seen.push(e.sequence);
          if (e.sequence === 4) return 'stop';
        }
      },
      {
        onOverflow: () => undefined,
        onError: () => undefined,
      },
    );
    await sut.done;
    expect(seen).toEqual([1, 2, 3, 4]);
  });

  it('replays the stored JSON text a page at a time, then live events as JSON.stringify writes them', async () => {
    await appendChunks(store, 'task_a', 9);
    const batches: RawEvent[][] = [];
    const sut = followEvents(
      sourceOf(store, bus),
      { kind: 'task', task_id: 'task_a', after_seq: 0 },
      (events) => void batches.push([...events]),
      { pageSize: 4, onOverflow: () => undefined, onError: () => undefined },
    );
    while (batches.flat().length < 10) await new Promise((r) => setTimeout(r, 5));
    await appendChunks(store, 'task_a', 1);
    while (batches.flat().length < 11) await new Promise((r) => setTimeout(r, 5));
    sut.stop();
    await sut.done;
    expect(batches.map((b) => b.length)).toEqual([4, 4, 2, 1]);
    const stored = await store.readStream('task_a');
    expect(batches.flat().map((e) => e.json)).toEqual(stored.map((e) => JSON.stringify(e)));
  });

  it('reports overflow when live events pile up behind a stuck consumer, without blocking the writer', async () => {
    await appendChunks(store, 'task_a', 1);
    let release!: () => void;
    const stuck = new Promise<void>((r) => (release = r));
    const overflows: number[] = [];
    const sut = followEvents(
      sourceOf(store, bus),
      { kind: 'task', task_id: 'task_a', after_seq: 0 },
      () => stuck,
      {
        maxQueued: 20,
        onOverflow: (n) => overflows.push(n),
        onError: () => undefined,
      },
    );
    await appendChunks(store, 'task_a', 50);
    expect(await store.streamVersion('task_a')).toBe(52);
    expect(overflows).toEqual([21]);
    release();
    await sut.done;
  });
});
