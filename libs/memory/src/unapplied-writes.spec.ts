import { RuntimeEvent } from '@runledger/contracts';
import {
  HandedWritesFold,
  HeardWritesFold,
  foldWrites,
  unappliedHeard,
  uncommitted,
} from './unapplied-writes';

const write = (
  position: number,
  op: 'insert' | 'reinforce' | 'delete',
  entry_id: string,
  weight = 0.5,
): RuntimeEvent =>
  ({
    event_id: `evt_${position}_${entry_id}_${op}`,
    task_id: 'task_1',
    session_id: 'sess_1',
    sequence: position,
    position,
    type: 'MEMORY_WRITTEN',
    payload: {
      op,
      entry_id,
      kind: 'fact',
      text: `text of ${entry_id}`,
      weight,
      previous_weight: null,
      source: 'critic',
      source_event_id: null,
      reason: 'test',
      embedding_model: 'hash',
      embedding_dim: 8,
      metadata: {},
    },
    causation_id: null,
    correlation_id: 'corr',
    created_at: '2026-11-27T00:00:00.000Z',
  }) as unknown as RuntimeEvent;

const other = (position: number): RuntimeEvent =>
  ({ ...write(position, 'insert', 'x'), type: 'TOOL_CALLED', payload: {} }) as unknown as RuntimeEvent;

describe('unapplied memory writes', () => {
  it('fold per entry as a pass applies them: an insert keeps its event, a reinforce sets the weight, a delete ends it', () => {
    const heard = [
      write(1, 'insert', 'mem_a', 0.4),
      write(2, 'insert', 'mem_b', 0.4),
      write(3, 'reinforce', 'mem_a', 0.6),
      write(4, 'reinforce', 'mem_c', 0.7),
      write(5, 'delete', 'mem_b'),
      write(6, 'reinforce', 'mem_b', 0.9),
    ];
    const folded = unappliedHeard(heard, 0);
    expect(folded.get('mem_a')).toMatchObject({ weight: 0.6, insertedBy: heard[0], deleted: false });
    expect(folded.get('mem_b')).toMatchObject({ weight: 0.4, deleted: true });
    expect(folded.get('mem_c')).toMatchObject({ weight: 0.7, insertedBy: null, deleted: false });
    // what a pass applied is left out
    expect([...unappliedHeard(heard, 3).keys()].sort()).toEqual(['mem_b', 'mem_c']);
  });

  it('a fold built on another leaves that one and its entries as they were', () => {
    const base = unappliedHeard([write(1, 'insert', 'mem_a', 0.4)], 0);
    const before = structuredClone([...base.entries()]);
    const onTop = foldWrites(base, [write(0, 'reinforce', 'mem_a', 0.8), write(0, 'delete', 'mem_a')]);
    expect(onTop.get('mem_a')).toMatchObject({ weight: 0.8, deleted: true });
    expect(structuredClone([...base.entries()])).toEqual(before);
    // events with no memory write in them change nothing: the same fold comes back
    expect(foldWrites(base, [other(0)])).toBe(base);
  });

  it("a task's uncommitted events are the end of its log at position 0", () => {
    const log = [write(3, 'insert', 'mem_a'), other(4), write(0, 'insert', 'mem_b'), other(0)];
    expect(uncommitted(log)).toEqual(log.slice(2));
    expect(uncommitted(log.slice(0, 2))).toEqual([]);
  });

  it('is folded again only when a write was heard, the list replaced, or a pass applied more', () => {
    const fold = new HeardWritesFold();
    const heard = [write(1, 'insert', 'mem_a'), write(2, 'insert', 'mem_b')];
    const first = fold.of(heard, 0);
    expect(fold.of(heard, 0)).toBe(first);
    heard.push(write(3, 'insert', 'mem_c'));
    const afterHeard = fold.of(heard, 0);
    expect([...afterHeard.keys()]).toEqual(['mem_a', 'mem_b', 'mem_c']);
    const applied = fold.of(heard, 2);
    expect([...applied.keys()]).toEqual(['mem_c']);
    // which heard writes it holds: those not applied yet
    expect(heard.map((e) => fold.holds(e.event_id))).toEqual([false, false, true]);
    // a list replaced by one of the same length (trimmed by a pass, then a write heard)
    const replaced = [...heard.slice(1), write(4, 'insert', 'mem_d')];
    expect([...fold.of(replaced, 2).keys()]).toEqual(['mem_c', 'mem_d']);
  });

  it('writes handed to the store fold over the heard ones, and the fold is kept while nothing moves', () => {
    const sut = new HandedWritesFold();
    const heardWrite = write(5, 'insert', 'a', 0.3);
    const base = unappliedHeard([heardWrite], 0);
    // as writers folded them: no position before their commit
    const handedInsert = { ...write(9, 'insert', 'b', 0.6), position: 0 } as RuntimeEvent;
    const handedReinforce = { ...write(10, 'reinforce', 'a', 0.8), position: 0 } as RuntimeEvent;
    const handed = { version: 1, events: [other(0), handedInsert, handedReinforce] };
    const folded = sut.of(base, handed);
    expect(folded.get('b')).toMatchObject({ weight: 0.6, insertedBy: handedInsert });
    expect(folded.get('a')).toMatchObject({ weight: 0.8, insertedBy: heardWrite });
    expect(base.get('a')?.weight).toBe(0.3);
    expect(sut.of(base, handed)).toBe(folded);
    // which writes it took from the list: a task's own listed writes are not folded on top again
    expect([handedInsert, handedReinforce, heardWrite, other(0)].map((e) => sut.lists(e.event_id))).toEqual([
      true,
      true,
      false,
      false,
    ]);
    // a hand-over with no memory write in it changes nothing
    expect(sut.of(base, { version: 2, events: [...handed.events, other(0)] })).toBe(folded);
    // the insert's batch left the list (its commit was published): only the reinforce is still on its way
    const withoutB = sut.of(base, { version: 3, events: [handedReinforce] });
    expect(withoutB.has('b')).toBe(false);
    expect(sut.lists(handedInsert.event_id)).toBe(false);
    expect(withoutB.get('a')?.weight).toBe(0.8);
    // a new heard fold is folded onto afresh
    const heardMore = unappliedHeard([heardWrite, write(11, 'delete', 'a')], 0);
    expect(sut.of(heardMore, { version: 3, events: [handedReinforce] }).get('a')?.deleted).toBe(true);
  });
});
