import { NewEvent, emptyUsage } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { LogTaskViews, inputFirstLine } from './task-views';

const received = (input: string, session_id: string, created_at: string) =>
  ({ type: 'TASK_RECEIVED', payload: { input, session_id }, created_at }) as NewEvent;
const completed = (created_at: string) =>
  ({
    type: 'TASK_COMPLETED',
    payload: { stop_reason: 'completed', detail: 'done', result: 'ok', usage: emptyUsage() },
    created_at,
  }) as NewEvent;

describe('inputFirstLine', () => {
  it('is the first line with text, trimmed', () => {
    expect(inputFirstLine('\n  \n  fix the build \nthen deploy')).toBe('fix the build');
    expect(inputFirstLine('one line')).toBe('one line');
    expect(inputFirstLine('\r\n\r\nwindows line\r\nnext')).toBe('windows line');
    expect(inputFirstLine('   ')).toBe('');
  });

  it('cuts a long line to 200 characters, an ellipsis marking the cut', () => {
    const line = inputFirstLine('x'.repeat(500));
    expect(line).toHaveLength(200);
    expect(line.endsWith('…')).toBe(true);
    expect(inputFirstLine('y'.repeat(200))).toBe('y'.repeat(200));
  });
});

describe('LogTaskViews (tasks read from the log)', () => {
  let store: InMemoryEventStore;
  let sut: LogTaskViews;

  beforeEach(async () => {
    store = new InMemoryEventStore();
    sut = new LogTaskViews(store);
    await store.append(
      't1',
      [
        received('Deploy the API\nand smoke-test it', 's1', '2026-01-01T00:00:00.000Z'),
        completed('2026-01-01T00:00:02.500Z'),
      ],
      { expected: 'no_stream' },
    );
    await store.append('t2', [received('raise coverage to 50%', 's2', '2026-01-01T00:01:00.000Z')], {
      expected: 'no_stream',
    });
  });

  it("shows the input's first line, and the duration once the task has ended", async () => {
    expect(await sut.get('t1')).toMatchObject({ input_first_line: 'Deploy the API', duration_ms: 2500 });
    expect(await sut.get('t2')).toMatchObject({
      input_first_line: 'raise coverage to 50%',
      duration_ms: null,
    });
  });

  it('searches the input like the projection does: ASCII case-insensitive substring, with the session filter', async () => {
    const ids = async (q: string, session_id?: string) =>
      (await sut.list({ q, session_id, limit: 10 })).tasks.map((t) => t.task_id);
    expect(await ids('SMOKE-TEST')).toEqual(['t1']);
    expect(await ids('50%')).toEqual(['t2']);
    expect(await ids('e')).toEqual(['t2', 't1']);
    expect(await ids('e', 's1')).toEqual(['t1']);
    expect(await ids('nowhere')).toEqual([]);
  });
});
