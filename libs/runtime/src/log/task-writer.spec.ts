import { NewEvent, RuntimeEvent, emptyUsage } from '@runledger/contracts';
import { AppendOptions, AppendResult, InMemoryEventStore, WrappingEventStore } from '@runledger/event-store';
import { randomBytes } from 'node:crypto';
import { RedactingEventStore } from './redacting-event-store';
import { SessionSecrets } from './session-secrets';
import { TaskWriter } from './task-writer';

const received: NewEvent = {
  type: 'TASK_RECEIVED',
  payload: { input: 'x', session_id: 'ses_1' },
} as NewEvent;
const chunk = (index: number): NewEvent =>
  ({ type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index, delta: `d${index}` } }) as NewEvent;

describe('TaskWriter.defer', () => {
  it('writes deferred events at the head of the next append, in its commit; the caller gets back only its own', async () => {
    const store = new InMemoryEventStore();
    const commits: number[][] = [];
    store.onCommitted((events) => commits.push(events.map((e) => e.sequence)));
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    sut.defer([chunk(0)]);
    // folded at once, stored with the next append
    expect(sut.progress.last_seq).toBe(2);
    expect(await store.streamVersion('task_1')).toBe(1);
    const mine = await sut.append([chunk(1)]);
    expect(mine.map((e) => (e.payload as { index: number }).index)).toEqual([1]);
    expect(commits).toEqual([[1], [2, 3]]);
    expect(sut.progress.last_seq).toBe(3);
  });

  it('an append called before the deferral does not carry it: order follows the calls', async () => {
    const store = new InMemoryEventStore();
    const sut = await TaskWriter.open(store, 'task_1');
    const first = sut.append([received]);
    sut.defer([chunk(0)]);
    const second = sut.append([chunk(1)]);
    await Promise.all([first, second]);
    const log = await store.readStream('task_1');
    expect(log.map((e) => e.type === 'OUTPUT_CHUNK' && (e.payload as { index: number }).index)).toEqual([
      false,
      0,
      1,
    ]);
  });

  it('flush writes what is deferred in a commit of its own, and nothing when nothing is', async () => {
    const store = new InMemoryEventStore();
    const commits: number[][] = [];
    store.onCommitted((events) => commits.push(events.map((e) => e.sequence)));
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    await sut.flush();
    sut.defer([chunk(0), chunk(1)]);
    await sut.flush();
    expect(commits).toEqual([[1], [2, 3]]);
    expect(sut.progress.last_seq).toBe(3);
  });

  it('streamed events ride with an append made within the window, and are appended on their own when none is', async () => {
    const store = new InMemoryEventStore();
    const commits: number[][] = [];
    store.onCommitted((events) => commits.push(events.map((e) => e.sequence)));
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    sut.stream([chunk(0)], 1_000);
    sut.stream([chunk(1)], 1_000);
    await sut.append([chunk(2)]);
    expect(commits).toEqual([[1], [2, 3, 4]]);
    // the carried window's timer is gone: nothing is appended later on its account
    sut.stream([chunk(3)], 30);
    expect(await store.streamVersion('task_1')).toBe(4);
    await new Promise((r) => setTimeout(r, 80));
    expect(commits).toEqual([[1], [2, 3, 4], [5]]);
    expect(sut.committedThrough).toBe(5);
  });

  it('the fold holds what the log holds once committed: same envelopes, positions filled in, defaults as stored', async () => {
    const store = new InMemoryEventStore();
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    sut.defer([chunk(0)]);
    await sut.append([chunk(1)]);
    const log = await store.readStream('task_1');
    expect(sut.log).toEqual(log);
    // TASK_RECEIVED's defaults (accept_checks, budgets, source...) were in the fold before the store filled them
    expect(sut.log[0].payload).toMatchObject({ accept_checks: [], source: 'api' });
  });
});

/** Holds each append until `pass` lets the held ones through, or `refuse` fails them. */
class HoldingStore extends WrappingEventStore {
  private held: { go: () => void; fail: (err: unknown) => void }[] = [];

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    await new Promise<void>((go, fail) => this.held.push({ go, fail }));
    return this.inner.append(taskId, events, options);
  }

  get waiting(): number {
    return this.held.length;
  }

  pass(): void {
    for (const h of this.held.splice(0)) h.go();
  }

  refuse(err: unknown): void {
    for (const h of this.held.splice(0)) h.fail(err);
  }
}

const heldUntil = async (store: HoldingStore, n: number) => {
  for (let i = 0; i < 100 && store.waiting < n; i++) await new Promise((r) => setImmediate(r));
  expect(store.waiting).toBe(n);
};

const memoryWrite = (event_id: string, op: 'insert' | 'reinforce' = 'insert', weight = 0.5): NewEvent =>
  ({
    type: 'MEMORY_WRITTEN',
    event_id,
    payload: {
      op,
      entry_id: 'mem_1',
      kind: 'fact',
      text: 'the cache is in /var/cache',
      weight,
      source: 'critic',
      source_event_id: null,
      reason: 'test',
      embedding_model: 'hash',
      embedding_dim: 4,
    },
  }) as unknown as NewEvent;

const listedIds = (store: InMemoryEventStore) => store.handedOver().events.map((e) => e.event_id);
const loggedTypes = async (store: InMemoryEventStore) =>
  (await store.readStream('task_1')).map((e) => e.type);

/** As memory's decideWrite lists a write it decided, before the task's writer has it. */
const listDecided = (store: InMemoryEventStore, write: NewEvent, taskId: string) =>
  store.handOver([{ ...write, task_id: taskId, sequence: 0, position: 0 } as unknown as RuntimeEvent]);

/** A writer through `store` whose stream has its TASK_RECEIVED committed. */
const openReceived = async (store: HoldingStore) => {
  const sut = await TaskWriter.open(store, 'task_1');
  const first = sut.append([received]);
  await heldUntil(store, 1);
  store.pass();
  await first;
  return sut;
};

describe('TaskWriter lists its memory writes in the store from their staging to their commit', () => {
  it('while an append is on its way its memory writes stay listed as folded, and leave once it commits', async () => {
    const inner = new InMemoryEventStore();
    const store = new HoldingStore(inner);
    const sut = await TaskWriter.open(store, 'task_1');
    sut.defer([received, memoryWrite('evt_mem')]);
    const appended = sut.append([chunk(0)]);
    await heldUntil(store, 1);
    // only memory writes: memory's deduplication is the list's one reader
    const handed = inner.handedOver().events;
    expect(handed.map((e) => [e.type, e.sequence, e.position])).toEqual([['MEMORY_WRITTEN', 2, 0]]);
    expect(handed[0]).toBe(sut.log[1]);
    store.pass();
    await appended;
    expect(inner.handedOver().events).toEqual([]);
  });

  it('a deferred write is listed under its own id at once, and takes over a listing under that id in its place', async () => {
    const store = new InMemoryEventStore();
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    const releaseFirst = listDecided(store, memoryWrite('evt_first', 'reinforce', 0.6), 'task_1');
    listDecided(store, memoryWrite('evt_second', 'reinforce', 0.7), 'task_1');
    sut.defer([memoryWrite('evt_first', 'reinforce', 0.6)]);
    // the decision order stays: a later decision's weight still folds after the earlier one
    expect(listedIds(store)).toEqual(['evt_first', 'evt_second']);
    expect(store.handedOver().events[0]).toBe(sut.log[1]);
    // the decision's own release no longer touches what the writer listed
    releaseFirst();
    expect(listedIds(store)).toEqual(['evt_first', 'evt_second']);
    await sut.append([chunk(0)]);
    expect(listedIds(store)).toEqual(['evt_second']);
  });

  it('a write the run drops uncommitted leaves the list: the writer closes, or an append fails', async () => {
    const store = new InMemoryEventStore();
    const closed = await TaskWriter.open(store, 'task_1');
    await closed.append([received]);
    closed.defer([memoryWrite('evt_dropped')]);
    expect(listedIds(store)).toEqual(['evt_dropped']);
    closed.close();
    // once the appends already called are done (none here)
    await new Promise((r) => setImmediate(r));
    expect(listedIds(store)).toEqual([]);
    // one staged after the close (a sibling step still finishing) is not listed, and its decision's listing goes
    listDecided(store, memoryWrite('evt_late'), 'task_1');
    closed.defer([memoryWrite('evt_late')]);
    expect(listedIds(store)).toEqual([]);

    const inner = new InMemoryEventStore();
    const failing = new HoldingStore(inner);
    const failed = await TaskWriter.open(failing, 'task_2');
    failed.defer([received, memoryWrite('evt_sent')]);
    const appended = failed.append([chunk(0)]);
    await heldUntil(failing, 1);
    // staged while the append is on its way: it would ride in the next one
    failed.defer([memoryWrite('evt_waiting')]);
    expect(listedIds(inner)).toEqual(['evt_sent', 'evt_waiting']);
    const broken = new Error('disk gone');
    failing.refuse(broken);
    await expect(appended).rejects.toBe(broken);
    expect(listedIds(inner)).toEqual([]);
    // a decided write handed to the failed writer is refused, and its decision's listing goes
    listDecided(inner, memoryWrite('evt_after'), 'task_2');
    expect(() => failed.defer([memoryWrite('evt_after')])).toThrow(broken);
    expect(listedIds(inner)).toEqual([]);
  });

  it('closed while appends are still queued: their writes stay listed until they commit', async () => {
    const inner = new InMemoryEventStore();
    const store = new HoldingStore(inner);
    const sut = await TaskWriter.open(store, 'task_1');
    const first = sut.append([received]);
    await heldUntil(store, 1);
    // queued behind the one on its way (a sibling step), then the run closes the writer
    const second = sut.append([memoryWrite('evt_queued')]);
    sut.close();
    await new Promise((r) => setImmediate(r));
    expect(listedIds(inner)).toEqual(['evt_queued']);
    store.pass();
    await first;
    await heldUntil(store, 1);
    expect(listedIds(inner)).toEqual(['evt_queued']);
    store.pass();
    await second;
    expect(listedIds(inner)).toEqual([]);
    expect(await loggedTypes(inner)).toEqual(['TASK_RECEIVED', 'MEMORY_WRITTEN']);
  });

  it("a write refused for a conflict stays listed through the rebase, and leaves with the retry's commit", async () => {
    const inner = new InMemoryEventStore();
    const store = new HoldingStore(inner);
    const sut = await openReceived(store);
    sut.defer([memoryWrite('evt_mem')]);
    const appended = sut.append([chunk(0)]);
    await heldUntil(store, 1);
    // another writer gets in first: the held append is refused for its expected sequence
    await inner.append('task_1', [chunk(9)], { expected: 1 });
    store.pass();
    await heldUntil(store, 1);
    expect(listedIds(inner)).toEqual(['evt_mem']);
    store.pass();
    await appended;
    expect(listedIds(inner)).toEqual([]);
    expect(await loggedTypes(inner)).toEqual([
      'TASK_RECEIVED',
      'OUTPUT_CHUNK',
      'MEMORY_WRITTEN',
      'OUTPUT_CHUNK',
    ]);
  });
});

describe('TaskWriter hears the final event', () => {
  const completed = {
    type: 'TASK_COMPLETED',
    payload: { stop_reason: 'completed', detail: 'done', usage: emptyUsage(), result: 'ok' },
  } as NewEvent;

  it('handed once it goes to the store, committed once it is durable, each once, across a conflict', async () => {
    const inner = new InMemoryEventStore();
    const store = new HoldingStore(inner);
    const heard: string[] = [];
    const sut = await TaskWriter.open(store, 'task_1', null, null, {
      handed: () => heard.push('handed'),
      committed: () => heard.push('committed'),
    });
    const first = sut.append([received]);
    await heldUntil(store, 1);
    store.pass();
    await first;
    // another writer gets in before the end: the end is refused once, then sent again after the log
    await inner.append('task_1', [chunk(7)], { expected: 1 });
    const end = sut.append([completed]);
    await heldUntil(store, 1);
    expect(heard).toEqual(['handed']);
    store.pass();
    await heldUntil(store, 1);
    expect(heard).toEqual(['handed']);
    store.pass();
    await end;
    expect(heard).toEqual(['handed', 'committed']);
    expect(await loggedTypes(inner)).toEqual(['TASK_RECEIVED', 'OUTPUT_CHUNK', 'TASK_COMPLETED']);
  });
});

describe('TaskWriter when the store refuses', () => {
  it('another writer appended in between: the fold starts again from the log, and the pending events follow it', async () => {
    const store = new InMemoryEventStore();
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    // another process answers something on the same stream
    await store.append('task_1', [chunk(7)], { expected: 1 });
    sut.defer([chunk(0)]);
    const mine = await sut.append([chunk(1)]);
    expect(mine.map((e) => e.sequence)).toEqual([4]);
    const log = await store.readStream('task_1');
    expect(log.map((e) => (e.payload as { index?: number }).index ?? null)).toEqual([null, 7, 0, 1]);
    expect(sut.log).toEqual(log);
    expect(sut.progress.last_seq).toBe(4);
  });

  it('an invalid event is refused before anything is folded; the writer goes on', async () => {
    const store = new InMemoryEventStore();
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    await expect(
      sut.append([chunk(0), { type: 'OUTPUT_CHUNK', payload: { index: 'x' } } as unknown as NewEvent]),
    ).rejects.toThrow(/invalid OUTPUT_CHUNK payload/);
    expect(sut.progress.last_seq).toBe(1);
    await sut.append([chunk(1)]);
    expect((await store.readStream('task_1')).map((e) => e.sequence)).toEqual([1, 2]);
  });

  it('any other failure ends the writer: its deferred events and every later append get that error', async () => {
    const store = new InMemoryEventStore();
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    const broken = new Error('disk gone');
    jest.spyOn(store, 'append').mockRejectedValueOnce(broken);
    sut.defer([chunk(0)]);
    await expect(sut.append([chunk(1)])).rejects.toBe(broken);
    await expect(sut.append([chunk(2)])).rejects.toBe(broken);
    expect(() => sut.defer([chunk(3)])).toThrow(broken);
    expect(await store.streamVersion('task_1')).toBe(1);
  });

  it('folds what the stores in front of the log will write: a secret of the session never reaches the fold', async () => {
    const inner = new InMemoryEventStore();
    const secrets = new SessionSecrets(randomBytes(32));
    const store = new RedactingEventStore(inner, secrets);
    const sut = await TaskWriter.open(store, 'task_1');
    await sut.append([received]);
    secrets.remember('ses_1', 'hunter2-the-secret');
    sut.defer([
      {
        type: 'OUTPUT_CHUNK',
        payload: { call_id: 'c', index: 0, delta: 'pw hunter2-the-secret' },
      } as NewEvent,
    ]);
    expect(JSON.stringify(sut.log)).not.toContain('hunter2-the-secret');
    await sut.flush();
    const log = await inner.readStream('task_1');
    expect(JSON.stringify(log)).not.toContain('hunter2-the-secret');
    expect(sut.log).toEqual(log);
  });
});
