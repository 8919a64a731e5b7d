import { RuntimeEvent, ScheduleSpec } from '@runledger/contracts';
import { ScheduleState, decideFirings, evolveSchedules, slotInput } from './schedule-state';

const T0 = Date.parse('2026-11-29T10:00:00Z');
const at = (s: number) => T0 + s * 1000;
const iso = (s: number) => new Date(at(s)).toISOString();

let seq = 0;
const ev = (type: string, payload: Record<string, unknown>, created = iso(0)) =>
  ({ type, payload, created_at: created, sequence: ++seq }) as unknown as RuntimeEvent;

/** given: a schedule every 10 s created at T0, then these firings */
function given(spec: Partial<ScheduleSpec>, firings: Array<Record<string, unknown>> = []): ScheduleState {
  const states = new Map<string, ScheduleState>();
  evolveSchedules(
    states,
    ev('SCHEDULE_CREATED', {
      schedule_id: 'sched_a',
      spec: {
        cron: '*/10 * * * * *',
        time_zone: 'UTC',
        input: 'x',
        overlap: 'skip',
        catch_up: 'skip',
        ...spec,
      },
    }),
  );
  for (const f of firings)
    evolveSchedules(states, ev('SCHEDULE_FIRED', { schedule_id: 'sched_a', missed: 0, ...f }));
  return states.get('sched_a')!;
}
const taskOf = (slot: string) => `task_for_${slot}`;

describe('schedule decisions (given/when/then)', () => {
  it('a slot on time starts its task; nothing is due again until the next slot', () => {
    const s = given({});
    expect(decideFirings(s, at(10.3), false, taskOf)).toEqual([
      { schedule_id: 'sched_a', slot: iso(10), outcome: 'started', task_id: taskOf(iso(10)), missed: 0 },
    ]);
    const after = given({}, [{ slot: iso(10), outcome: 'started', task_id: 't1' }]);
    expect(decideFirings(after, at(19), true, taskOf)).toEqual([]);
  });

  it('overlap: skip while the previous task runs, buffer one (then start it once the task ended), or allow', () => {
    const running = [{ slot: iso(10), outcome: 'started', task_id: 't1' }];
    expect(decideFirings(given({ overlap: 'skip' }, running), at(20.1), true, taskOf)[0]).toMatchObject({
      outcome: 'skipped',
      task_id: null,
    });
    expect(decideFirings(given({ overlap: 'allow' }, running), at(20.1), true, taskOf)[0]).toMatchObject({
      outcome: 'started',
      task_id: taskOf(iso(20)),
    });
    const buffered = given({ overlap: 'buffer_one' }, running);
    expect(decideFirings(buffered, at(20.1), true, taskOf)[0]).toMatchObject({
      outcome: 'buffered',
      task_id: null,
    });
    const one = given({ overlap: 'buffer_one' }, [
      ...running,
      { slot: iso(20), outcome: 'buffered', task_id: null },
    ]);
    // a second slot while one is buffered is skipped
    expect(decideFirings(one, at(30.1), true, taskOf)[0]).toMatchObject({
      slot: iso(30),
      outcome: 'skipped',
    });
    // the task ended: the buffered slot starts (and no slot is due)
    expect(decideFirings(one, at(25), false, taskOf)).toEqual([
      { schedule_id: 'sched_a', slot: iso(20), outcome: 'started', task_id: taskOf(iso(20)), missed: 0 },
    ]);
    expect(
      given({ overlap: 'buffer_one' }, [
        ...running,
        { slot: iso(20), outcome: 'buffered', task_id: null },
        { slot: iso(20), outcome: 'started', task_id: taskOf(iso(20)) },
      ]).buffered,
    ).toBeNull();
  });

  it('catch-up after downtime: skip records the missed slots as one event; run_once starts one task for them', () => {
    const last = [{ slot: iso(10), outcome: 'started', task_id: 't1' }];
    expect(decideFirings(given({ catch_up: 'skip' }, last), at(55), false, taskOf)).toEqual([
      { schedule_id: 'sched_a', slot: iso(50), outcome: 'missed', task_id: null, missed: 4 },
    ]);
    expect(decideFirings(given({ catch_up: 'run_once' }, last), at(55), false, taskOf)).toEqual([
      { schedule_id: 'sched_a', slot: iso(50), outcome: 'started', task_id: taskOf(iso(50)), missed: 3 },
    ]);
    // one slot, but decided past its grace (half the interval, at least 1.5 s): a catch-up too
    expect(decideFirings(given({ catch_up: 'skip' }, last), at(26), false, taskOf)[0]).toMatchObject({
      outcome: 'missed',
      missed: 1,
    });
  });

  it('a paused or deleted schedule decides nothing', () => {
    const s = given({});
    s.paused = true;
    expect(decideFirings(s, at(60), false, taskOf)).toEqual([]);
  });

  it("a slot's input: the template filled in", () => {
    expect(
      slotInput(
        { input: 'report for {{date}} at {{ time }} ({{slot}}, {{schedule_id}}) {{other}}' } as ScheduleSpec,
        'sched_a',
        iso(10),
        at(10),
      ),
    ).toBe(`report for 2026-11-29 at 10:00:10 (${iso(10)}, sched_a) {{other}}`);
  });
});
