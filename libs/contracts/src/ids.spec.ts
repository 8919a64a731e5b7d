import { newId } from './ids';

describe('newId', () => {
  it('is the prefix and 32 hex digits, never the same twice', () => {
    const ids = Array.from({ length: 10_000 }, () => newId('evt'));
    for (const id of ids) expect(id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('sorts an id made in a later millisecond after one made earlier (the log indexes grow at their end)', () => {
    const now = jest.spyOn(Date, 'now');
    try {
      const made = [1_700_000_000_000, 1_700_000_000_001, 1_700_086_400_000, 1_800_000_000_000].map((ms) => {
        now.mockReturnValue(ms);
        return newId('task');
      });
      expect([...made].sort()).toEqual(made);
      expect(made[0].slice('task_'.length, 'task_'.length + 12)).toBe(
        (1_700_000_000_000).toString(16).padStart(12, '0'),
      );
    } finally {
      now.mockRestore();
    }
  });

  it('keeps 80 random bits after the time: ids of one millisecond differ there', () => {
    const now = jest.spyOn(Date, 'now').mockReturnValue(1_700_000_000_000);
    try {
      const tails = new Set(Array.from({ length: 1_000 }, () => newId('evt').slice(-20)));
      expect(tails.size).toBe(1_000);
    } finally {
      now.mockRestore();
    }
  });
});
