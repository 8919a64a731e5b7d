import { EventType, NewEvent, RuntimeEvent } from '@runledger/contracts';
import { EventBus, InMemoryEventStore } from '@runledger/event-store';
import { EventSource, FollowCursor, followEvents } from './follow-events';

const chunk = (index: number): NewEvent =>
  ({ type: 'OUTPUT_CHUNK', payload: { call_id: 'call_1', index, delta: `d${index}` } }) as NewEvent;
const received = (): NewEvent =>
  ({ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 'ses_1' } }) as NewEvent;

function sourceOf(store: InMemoryEventStore, bus: EventBus): EventSource {
  return {
    committed$: bus.events$,
    readStream: (taskId, o) => store.readStream(taskId, o),
    readAll: (o: { after_position: number; limit: number; types?: EventType[]; task_id?: string }) =>
      store.readAll(o),
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

  it.each<[string, (t: string) => FollowCursor, (e: RuntimeEvent) => number]>([
    ['one task from after_seq', (t) => ({ kind: 'task', task_id: t, after_seq: 10 }), (e) => e.sequence],
    ['the global log from after_position', () => ({ kind: 'all', after_position: 10 }), (e) => e.position],
  ])('follows %s across the replay/live seam with no gap and no duplicate', async (_, cursorFor, key) => {
    await appendChunks(store, 'task_a', 300);
    const seen: number[] = [];
    const sut = followEvents(
      sourceOf(store, bus),
      cursorFor('task_a'),
      async (e) => {
        seen.push(key(e));
        if (seen.length % 50 === 0) await new Promise((r) => setTimeout(r, 1));
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
    const seen: RuntimeEvent[] = [];
    const sut = followEvents(
      sourceOf(store, bus),
      { kind: 'all', after_position: 0, types: ['TASK_RECEIVED'] },
      (e) => void seen.push(e),
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
      (e) => (seen.push(e.sequence), e.sequence === 4 ? 'stop' : undefined),
      {
        onOverflow: () => undefined,
        onError: () => undefined,
      },
    );
    await sut.done;
    expect(seen).toEqual([1, 2, 3, 4]);
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
