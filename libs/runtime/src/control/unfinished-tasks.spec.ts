import { NewEvent, emptyUsage } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { UnfinishedTasks } from './unfinished-tasks';

const received = { type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } } as NewEvent;
const awaiting = {
  type: 'TASK_AWAITING_PERMISSION',
  payload: {
    request_id: 'perm_1',
    call_id: 'call_1',
    tool: 'echo',
    args: {},
    args_hash: 'h',
    reason: 'r',
  },
} as NewEvent;
const resolved = {
  type: 'PERMISSION_RESOLVED',
  payload: { request_id: 'perm_1', call_id: 'call_1', decision: 'allow_once', args_hash: 'h', tool: 'echo' },
} as NewEvent;
const completed = {
  type: 'TASK_COMPLETED',
  payload: { stop_reason: 'completed', detail: 'ok', usage: emptyUsage(), result: '' },
} as NewEvent;

describe('UnfinishedTasks', () => {
  it('lists received tasks until they end, leaving out those waiting for a person until answered', async () => {
    const store = new InMemoryEventStore();
    const sut = new UnfinishedTasks(store);
    await store.append('t1', [received], { expected: 'no_stream' });
    await store.append('t2', [received, awaiting], { expected: 'no_stream' });
    expect(await sut.list()).toEqual(['t1']);
    await store.append('t2', [resolved], { expected: 2 });
    await store.append('t1', [completed], { expected: 1 });
    expect(await sut.list()).toEqual(['t2']);
    // later looks read only what was appended since
    const readAll = jest.spyOn(store, 'readAll');
    await store.append('t3', [received], { expected: 'no_stream' });
    expect(await sut.list()).toEqual(['t2', 't3']);
    expect(readAll).toHaveBeenCalledWith(expect.objectContaining({ after_position: 5 }));
  });

  it('reads a long backlog a page at a time, letting the event loop run between pages', async () => {
    const store = new InMemoryEventStore();
    const sut = new UnfinishedTasks(store);
    const ids = Array.from({ length: 600 }, (_, i) => `t${String(i).padStart(3, '0')}`);
    for (const id of ids) await store.append(id, [received], { expected: 'no_stream' });
    const readAll = jest.spyOn(store, 'readAll');
    // counts the loop's turns: another callback waiting its turn, as a request would
    let turns = 0;
    let listing = true;
    const tick = () => {
      turns++;
      if (listing) setImmediate(tick);
    };
    setImmediate(tick);
    try {
      expect((await sut.list()).sort()).toEqual(ids);
    } finally {
      listing = false;
    }
    expect(readAll.mock.calls.length).toBeGreaterThan(1);
    // timers ran while the pages were read: no page read waited for the whole backlog
    expect(turns).toBeGreaterThanOrEqual(readAll.mock.calls.length - 1);
  });

  it('leaves out a task waiting for its client until every call the client was asked for has its result', async () => {
    const store = new InMemoryEventStore();
    const sut = new UnfinishedTasks(store);
    const ask = (request_id: string, call_id: string) =>
      ({
        type: 'TASK_AWAITING_CLIENT_TOOL',
        payload: { request_id, call_id, tool: 'setTheme', args: {}, reason: 'r' },
      }) as NewEvent;
    const result = (call_id: string, request_id?: string) =>
      ({
        type: 'TOOL_COMPLETED',
        payload: {
          call_id,
          tool: 'setTheme',
          result: { tool: 'setTheme', ok: true, output: 1, error: null, metadata: {} },
          duration_ms: 0,
          ...(request_id ? { request_id } : {}),
        },
      }) as NewEvent;
    await store.append('t1', [received, ask('ct_1', 'call_a'), ask('ct_2', 'call_b')], {
      expected: 'no_stream',
    });
    expect(await sut.list()).toEqual([]);
    // an outcome of a tool that ran here, and a person's answer meanwhile, do not end the wait
    await store.append('t1', [result('call_c'), awaiting, resolved], { expected: 3 });
    expect(await sut.list()).toEqual([]);
    await store.append('t1', [result('call_a', 'ct_1')], { expected: 6 });
    expect(await sut.list()).toEqual([]);
    await store.append('t1', [result('call_b', 'ct_2')], { expected: 7 });
    expect(await sut.list()).toEqual(['t1']);
  });
});
