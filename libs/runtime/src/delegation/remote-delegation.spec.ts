import { RuntimeEvent } from '@runledger/contracts';
import { remoteActiveMs } from './remote-delegation';

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const event = (type: string, second: number, payload: Record<string, unknown>): RuntimeEvent =>
  ({ type, created_at: at(second), payload }) as unknown as RuntimeEvent;

describe('remoteActiveMs', () => {
  const started = event('CHILD_TASK_STARTED', 0, { call_id: 'c1' });
  const asked = event('TASK_AWAITING_PERMISSION', 10, { call_id: 'c1.elicit1', request_id: 'perm_1' });
  const answered = event('PERMISSION_RESOLVED', 70, { request_id: 'perm_1' });

  it('counts from the delegation start, less the time its forwarded question waited for a person', () => {
    expect(remoteActiveMs([started], 'c1', new Date(at(30)))).toBe(30_000);
    expect(remoteActiveMs([started, asked], 'c1', new Date(at(50)))).toBe(10_000);
    expect(remoteActiveMs([started, asked, answered], 'c1', new Date(at(90)))).toBe(30_000);
  });

  it("another call's question (a parallel step) does not stop this delegation's clock", () => {
    const other = event('TASK_AWAITING_PERMISSION', 10, { call_id: 'c2', request_id: 'perm_2' });
    const otherAnswered = event('PERMISSION_RESOLVED', 70, { request_id: 'perm_2' });
    expect(remoteActiveMs([started, other, otherAnswered], 'c1', new Date(at(90)))).toBe(90_000);
  });

  it('a delegation not started yet has run for no time', () => {
    expect(remoteActiveMs([], 'c1', new Date(at(5)))).toBe(0);
  });
});
