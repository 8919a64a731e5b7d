import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { AppendOptions, AppendResult } from './event-store';
import { InMemoryEventStore } from './in-memory-event-store';
import { WrappingEventStore } from './wrapping-event-store';

class PassingThrough extends WrappingEventStore {
  append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    return this.inner.append(taskId, events, options);
  }
}

const folded = (id: string): RuntimeEvent =>
  ({ event_id: id, task_id: 't', sequence: 1, position: 0, type: 'OUTPUT_CHUNK' }) as RuntimeEvent;

describe('EventStore.handOver', () => {
  it('lists what is handed over, in order, until each is released; the same view while nothing changes', () => {
    const sut = new InMemoryEventStore();
    const empty = sut.handedOver();
    expect(empty.events).toEqual([]);
    expect(sut.handedOver()).toBe(empty);
    const releaseA = sut.handOver([folded('a1'), folded('a2')]);
    const releaseB = sut.handOver([folded('b1')]);
    const both = sut.handedOver();
    expect(both.events.map((e) => e.event_id)).toEqual(['a1', 'a2', 'b1']);
    expect(both.version).toBeGreaterThan(empty.version);
    expect(sut.handedOver()).toBe(both);
    releaseA();
    const onlyB = sut.handedOver();
    expect(onlyB.events.map((e) => e.event_id)).toEqual(['b1']);
    expect(onlyB.version).toBeGreaterThan(both.version);
    // a second release changes nothing
    releaseA();
    expect(sut.handedOver()).toBe(onlyB);
    releaseB();
    expect(sut.handedOver().events).toEqual([]);
  });

  it('events listed again under the same first id keep their place; the earlier release then changes nothing', () => {
    const sut = new InMemoryEventStore();
    const releaseDecided = sut.handOver([folded('a')]);
    sut.handOver([folded('b')]);
    const staged = folded('a');
    const releaseStaged = sut.handOver([staged]);
    expect(sut.handedOver().events.map((e) => e.event_id)).toEqual(['a', 'b']);
    expect(sut.handedOver().events[0]).toBe(staged);
    releaseDecided();
    expect(sut.handedOver().events.map((e) => e.event_id)).toEqual(['a', 'b']);
    releaseStaged();
    expect(sut.handedOver().events.map((e) => e.event_id)).toEqual(['b']);
  });

  it('a store in front of another hands over to the inner one: both see the same', () => {
    const inner = new InMemoryEventStore();
    const sut = new PassingThrough(inner);
    const release = sut.handOver([folded('x')]);
    expect(inner.handedOver().events.map((e) => e.event_id)).toEqual(['x']);
    expect(sut.handedOver()).toBe(inner.handedOver());
    release();
    expect(inner.handedOver().events).toEqual([]);
  });

  it('a batch leaves the list when its commit is published, before the commit listeners hear it', async () => {
    const sut = new InMemoryEventStore();
    const received = { type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 'ses_1' } } as NewEvent;
    const other = sut.handOver([folded('still_on_its_way')]);
    sut.handOver([{ ...folded('evt_1'), type: 'TASK_RECEIVED' } as RuntimeEvent]);
    const heardWith: string[][] = [];
    sut.onCommitted(() => heardWith.push(sut.handedOver().events.map((e) => e.event_id)));
    await sut.append('t', [{ ...received, event_id: 'evt_1' }], { expected: 'no_stream' });
    expect(heardWith).toEqual([['still_on_its_way']]);
    other();
    expect(sut.handedOver().events).toEqual([]);
  });
});
