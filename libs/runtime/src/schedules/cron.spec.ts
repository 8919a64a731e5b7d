import { ValidationError } from '@runledger/contracts';
import { dueSlots, nextSlot, parseCron } from './cron';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const next = (expr: string, from: string, tz = 'UTC') => iso(nextSlot(parseCron(expr), tz, at(from)));

describe('cron expressions', () => {
  it('five fields: the next minute that matches, strictly after the given instant', () => {
    expect(next('*/15 * * * *', '2026-11-29T10:07:30Z')).toBe('2026-11-29T10:15:00.000Z');
    expect(next('*/15 * * * *', '2026-11-29T10:15:00Z')).toBe('2026-11-29T10:30:00.000Z');
    expect(next('0 9 * * mon-fri', '2026-11-28T12:00:00Z')).toBe('2026-11-30T09:00:00.000Z'); // Sat -> Mon
    expect(next('30 2 1 jan,jul *', '2026-02-01T00:00:00Z')).toBe('2026-07-01T02:30:00.000Z');
    expect(next('0 0 29 2 *', '2026-03-01T00:00:00Z')).toBe('2028-02-29T00:00:00.000Z');
    expect(next('5-10/2 3 * * *', '2026-11-29T03:06:00Z')).toBe('2026-11-29T03:07:00.000Z');
    expect(next('0 12 * * 7', '2026-11-29T12:00:00Z')).toBe('2026-12-06T12:00:00.000Z'); // 7 is Sunday
  });

  it('both day fields restricted: a day matching either runs (Vixie cron)', () => {
    // the 1st of the month or a Friday, whichever comes first
    expect(next('0 0 1 * fri', '2026-11-29T00:00:00Z')).toBe('2026-12-01T00:00:00.000Z');
    expect(next('0 0 1 * fri', '2026-12-01T00:00:00Z')).toBe('2026-12-04T00:00:00.000Z');
  });

  it('six fields: seconds first', () => {
    expect(next('*/2 * * * * *', '2026-11-29T10:00:01.500Z')).toBe('2026-11-29T10:00:02.000Z');
    expect(next('30 0 * * * *', '2026-11-29T10:00:30Z')).toBe('2026-11-29T11:00:30.000Z');
  });

  it('a time zone: slots on its wall clock; a time DST skips does not run that day, a repeated one runs once', () => {
    expect(next('0 9 * * *', '2026-11-29T00:00:00Z', 'America/New_York')).toBe('2026-11-29T14:00:00.000Z');
    // Europe/Berlin: 2026-03-29 02:00 -> 03:00; 02:30 does not exist that day
    expect(next('30 2 * * *', '2026-03-28T12:00:00Z', 'Europe/Berlin')).toBe('2026-03-30T00:30:00.000Z');
    // 2026-10-25 03:00 -> 02:00: 02:30 comes twice, the slot is the first
    const first = next('30 2 * * *', '2026-10-24T12:00:00Z', 'Europe/Berlin');
    expect(first).toBe('2026-10-25T00:30:00.000Z');
    expect(next('30 2 * * *', first!, 'Europe/Berlin')).toBe('2026-10-26T01:30:00.000Z');
  });

  it('no time that exists: null', () => {
    expect(next('0 0 30 2 *', '2026-01-01T00:00:00Z')).toBeNull();
  });

  it('due slots between two instants, the newest kept when there are more than asked for', () => {
    const cron = parseCron('* * * * *');
    expect(dueSlots(cron, 'UTC', at('2026-11-29T10:00:30Z'), at('2026-11-29T10:03:00Z'))).toEqual({
      slots: [at('2026-11-29T10:01:00Z'), at('2026-11-29T10:02:00Z'), at('2026-11-29T10:03:00Z')],
      total: 3,
    });
    expect(dueSlots(cron, 'UTC', at('2026-11-29T10:00:00Z'), at('2026-11-29T11:00:00Z'), 2)).toEqual({
      slots: [at('2026-11-29T10:59:00Z'), at('2026-11-29T11:00:00Z')],
      total: 60,
    });
  });

  it.each([
    ['* * * *', /4 fields/],
    ['* * * * * * *', /7 fields/],
    ['60 * * * *', /minute: 60 is outside 0-59/],
    ['* 24 * * *', /hour: 24 is outside 0-23/],
    ['* * 0 * *', /day of month: 0 is outside 1-31/],
    ['* * * 13 *', /month: 13 is outside 1-12/],
    ['* * * foo *', /month: "foo" is not a number/],
    ['*/0 * * * *', /a step must be at least 1/],
    ['5-1 * * * *', /runs backwards/],
    ['? * * * *', /\? only stands for a day field/],
    ['1-2-3 * * * *', /is not a range/],
  ])('refuses %s', (expr, why) => {
    expect(() => parseCron(expr)).toThrow(ValidationError);
    expect(() => parseCron(expr)).toThrow(why);
  });

  it('refuses an unknown time zone', () => {
    expect(() => nextSlot(parseCron('* * * * *'), 'Mars/Olympus', 0)).toThrow(
      /unknown time zone "Mars\/Olympus"/,
    );
  });
});
