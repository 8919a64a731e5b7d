import { NewEvent } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
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
    expect(sut.progress.last_seq).toBe(1);
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
});
