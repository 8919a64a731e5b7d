import { InlineProjection } from '../inline-projection';

/**
 * A projection for writer-thread tests, loaded by module path in the thread:
 * it records each event's position in table `projected` and refuses events
 * of task `bad`.
 */
export function createPickyProjection(): InlineProjection {
  return {
    name: 'picky',
    apply(raw, events) {
      for (const e of events) {
        if (e.task_id === 'bad') throw new Error('projection refused task bad');
        raw.prepare('INSERT INTO projected (position) VALUES (?)').run(e.position);
      }
    },
    reset: (raw) => raw.prepare('DELETE FROM projected').run(),
  };
}
