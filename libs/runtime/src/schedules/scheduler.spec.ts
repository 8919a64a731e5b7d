import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import {
  AppendOptions,
  AppendResult,
  InMemoryEventStore,
  ReadStreamOptions,
  WrappingEventStore,
} from '@runledger/event-store';
import {
  AllowAllPolicy,
  TaskRoutedBackend,
  TestRuntime,
  startTestRuntime,
  testToolRegistry,
} from '../testing';
import { useTempStore } from '../testing/temp-store';
import { SCHEDULES_STREAM } from './schedule-state';
import { Scheduler } from './scheduler';

/** Counts the reads of the schedules stream a scheduler makes. */
class CountingStore extends WrappingEventStore {
  scheduleReads = 0;
  constructor(inner: InMemoryEventStore) {
    super(inner);
  }
  append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.inner.append(taskId, events, options);
  }
  override readStream(taskId: string, options?: ReadStreamOptions): Promise<RuntimeEvent[]> {
    if (taskId === SCHEDULES_STREAM) this.scheduleReads++;
    return super.readStream(taskId, options);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Scheduler: wakes for the next due slot and for changes, not on a fast poll', () => {
  const temp = useTempStore('rl-scheduler-');
  let store: CountingStore;
  let rt: TestRuntime;
  let sut: Scheduler;

  beforeEach(async () => {
    store = new CountingStore(new InMemoryEventStore());
    rt = await startTestRuntime({
      store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model: new TaskRoutedBackend((task) => JSON.stringify({ type: 'respond', content: `did ${task}` })),
    });
    sut = new Scheduler(store, rt.runtime, rt.logger);
  });
  afterEach(async () => {
    await sut.stop();
    await rt.close();
  });

  const fired = async () =>
    (await store.readWholeStream(SCHEDULES_STREAM)).filter(
      (e): e is RuntimeEvent<'SCHEDULE_FIRED'> => e.type === 'SCHEDULE_FIRED',
    );

  it('idle (a yearly schedule): one look at the start, none while nothing is due', async () => {
    await sut.create({ cron: '0 0 1 1 *', input: 'new year' });
    sut.start();
    await sleep(100);
    const afterStart = store.scheduleReads;
    await sleep(2_000);
    // a look every 250 ms would have read it 8 times
    expect(store.scheduleReads - afterStart).toBe(0);
    expect(await fired()).toEqual([]);
  });

  it('a schedule created (or resumed) while it sleeps fires its slots on time, each once, and nothing in between', async () => {
    sut.start();
    await sleep(100);
    const { schedule_id } = await sut.create({ cron: '* * * * * *', input: 'tick {{slot}}' });
    await sleep(2_600);
    await sut.pause(schedule_id, true);
    const slots = (await fired()).map((e) => e.payload);
    expect(slots.length).toBeGreaterThanOrEqual(2);
    expect(slots.length).toBeLessThanOrEqual(3);
    for (const f of slots) expect(f).toMatchObject({ outcome: 'started', missed: 0 });
    // each slot decided within its grace, one second apart
    const times = slots.map((f) => Date.parse(f.slot));
    for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(1_000);
    for (const e of await fired())
      expect(Date.parse(e.created_at) - Date.parse(e.payload.slot)).toBeLessThan(500);
    // a few looks per slot (the wake, the look after its own record, the pause), not four a second
    expect(store.scheduleReads).toBeLessThan(6 * slots.length + 6);
    const reads = store.scheduleReads;
    await sleep(1_500);
    expect(store.scheduleReads).toBe(reads);
    expect(await fired()).toHaveLength(slots.length);

    await sut.pause(schedule_id, false);
    await sleep(1_300);
    expect((await fired()).length).toBeGreaterThan(slots.length);
  });
});
