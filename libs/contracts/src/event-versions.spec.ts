import {
  CURRENT_EVENT_VERSIONING,
  EventVersioning,
  FIRST_SCHEMA_VERSION,
  MissingUpcasterError,
  currentSchemaVersion,
  upcastEvent,
  upcastPayload,
} from './event-versions';
import { EVENT_TYPES } from './events';

/** A catalogue where TASK_COMPLETED's `result` became `answer` (v2) and then gained `words` (v3). */
const renamed: EventVersioning = {
  versions: { TASK_COMPLETED: 3 },
  upcasters: {
    TASK_COMPLETED: {
      1: ({ result, ...rest }) => ({ ...rest, answer: result }),
      2: (p) => ({ ...p, words: String(p.answer).split(' ').length }),
    },
  },
};

describe('event versions', () => {
  it('every event type has a current version with a full chain of upcasters up to it', () => {
    for (const type of EVENT_TYPES) {
      const current = currentSchemaVersion(type);
      expect(current).toBeGreaterThanOrEqual(FIRST_SCHEMA_VERSION);
      const chain = CURRENT_EVENT_VERSIONING.upcasters[type] ?? {};
      for (let v = FIRST_SCHEMA_VERSION; v < current; v++) expect(typeof chain[v]).toBe('function');
    }
  });

  it('runs the chain from the stored version to the current one, in order', () => {
    expect(upcastPayload('TASK_COMPLETED', 1, { result: 'two words', detail: 'd' }, renamed)).toEqual({
      detail: 'd',
      answer: 'two words',
      words: 2,
    });
    expect(upcastPayload('TASK_COMPLETED', 2, { answer: 'one' }, renamed)).toEqual({
      answer: 'one',
      words: 1,
    });
  });

  it('hands a current payload back as it is, and one from newer code untouched', () => {
    const current = { answer: 'x', words: 1 };
    expect(upcastPayload('TASK_COMPLETED', 3, current, renamed)).toBe(current);
    const newer = { whatever: true };
    expect(upcastPayload('TASK_COMPLETED', 4, newer, renamed)).toBe(newer);
    const other = { input: 'hi' };
    expect(upcastPayload('TASK_RECEIVED', 1, other, renamed)).toBe(other);
  });

  it('serves an upcast event at the version its payload now has, without touching the stored one', () => {
    const stored = { type: 'TASK_COMPLETED', schema_version: 1, payload: { result: 'a b c' }, task_id: 't' };
    const served = upcastEvent(stored, renamed);
    expect(served).toEqual({
      type: 'TASK_COMPLETED',
      schema_version: 3,
      payload: { answer: 'a b c', words: 3 },
      task_id: 't',
    });
    expect(stored.payload).toEqual({ result: 'a b c' });
    const current = { ...served };
    expect(upcastEvent(current, renamed)).toBe(current);
  });

  it('a missing step of the chain is an error naming the type and the version', () => {
    const gap: EventVersioning = {
      versions: { TASK_COMPLETED: 3 },
      upcasters: { TASK_COMPLETED: { 1: (p) => p } },
    };
    expect(() => upcastPayload('TASK_COMPLETED', 1, {}, gap)).toThrow(MissingUpcasterError);
    expect(() => upcastPayload('TASK_COMPLETED', 1, {}, gap)).toThrow('TASK_COMPLETED from schema version 2');
  });
});
