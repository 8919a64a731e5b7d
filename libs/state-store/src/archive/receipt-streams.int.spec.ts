import { EventPayload } from '@runledger/contracts';
import { Storage } from '../storage';
import { TempStorage, describeEachStorage } from '../testing/temp-storage';
import { withArchiver } from '../testing/with-archiver';
import { parseRetention } from './retention-policy';

/**
 * Receipt streams (inbound hook deliveries: one event each, of no task) leave the live log by age,
 * once older than the policy's longest age, and stay readable: the stream reads the same, its
 * version holds (a second receipt for the delivery is refused), and a restore brings it back.
 */
const NOW = Date.parse('2026-11-30T12:00:00Z');
const hoursAgo = (h: number) => new Date(NOW - h * 3_600_000).toISOString();
/** failed tasks go after 1h, every other after 2h: receipts after 2h, the longest */
const policy = parseRetention(
  JSON.stringify([{ older_than: '1h', status: ['failed'] }, { older_than: '2h' }]),
)!;

const receipt = (delivery: string): EventPayload<'HOOK_RECEIVED'> => ({
  hook: 'gh',
  delivery_id: delivery,
  action: 'ignored',
  task_id: null,
  signal_id: null,
  signal_name: null,
  body_sha256: '0'.repeat(64),
});

describeEachStorage('receipt streams archived by age', (open) => {
  let temp: TempStorage<Storage>;
  beforeEach(async () => {
    temp = await open();
    const write = (stream: string, at: string) =>
      temp.storage.eventStore.append(
        stream,
        [{ type: 'HOOK_RECEIVED', session_id: stream, created_at: at, payload: receipt(stream) }],
        { expected: 'no_stream' },
      );
    await write('hook:gh:old-a', hoursAgo(5));
    await write('hook:gh:old-b', hoursAgo(3));
    await write('hook:gh:recent', hoursAgo(1.5));
    // a stream past the prefix's range, as old: not a receipt
    await write('hooks-other', hoursAgo(5));
  });
  afterEach(() => temp.dispose());

  const options = { batchTasks: 1, receiptStreamPrefixes: ['hook:'] };

  it('moves the receipts older than the longest age, one batch at a time, and reads them back', async () => {
    const { eventStore } = temp.storage;
    const before = await eventStore.readStream('hook:gh:old-a');
    const dry = await withArchiver(temp, (a) => a.run(policy, NOW, { dryRun: true }), options);
    expect([dry.receipts, dry.events, dry.segments]).toEqual([2, 2, []]);
    const run = await withArchiver(temp, (a) => a.run(policy, NOW), options);
    expect([run.receipts, run.events, run.tasks, run.segments.length]).toEqual([2, 2, [], 2]);
    const live = await eventStore.readAll();
    expect(live.filter((e) => e.type === 'HOOK_RECEIVED').map((e) => e.task_id)).toEqual([
      'hook:gh:recent',
      'hooks-other',
    ]);
    const records = live.filter((e) => e.type === 'TASKS_ARCHIVED');
    expect(records.map((e) => (e.payload as EventPayload<'TASKS_ARCHIVED'>).companion_streams)).toEqual([
      ['hook:gh:old-a'],
      ['hook:gh:old-b'],
    ]);
    expect(await eventStore.readStream('hook:gh:old-a')).toEqual(before);
    expect(await eventStore.streamVersion('hook:gh:old-a')).toBe(1);
    await expect(
      eventStore.append(
        'hook:gh:old-a',
        [{ type: 'HOOK_RECEIVED', session_id: 'hook:gh:old-a', payload: receipt('again') }],
        { expected: 'no_stream' },
      ),
    ).rejects.toThrow();
    // a second run finds nothing more
    const again = await withArchiver(temp, (a) => a.run(policy, NOW), options);
    expect([again.receipts, again.events]).toEqual([0, 0]);
    // and a restore brings one back into the live log
    await withArchiver(temp, (a) => a.restore('hook:gh:old-b'), options);
    expect((await eventStore.readAll({ types: ['HOOK_RECEIVED'] })).map((e) => e.task_id)).toEqual([
      'hook:gh:old-b',
      'hook:gh:recent',
      'hooks-other',
    ]);
  });

  it('moves none without the prefix, nor before the longest age', async () => {
    const none = await withArchiver(temp, (a) => a.run(policy, NOW), { batchTasks: 10 });
    expect([none.receipts, none.events]).toEqual([0, 0]);
    const early = await withArchiver(temp, (a) => a.run(policy, NOW - 4 * 3_600_000), options);
    expect([early.receipts, early.events]).toEqual([0, 0]);
  });
});
