import { createDeadline } from './deadline';
import { FailureError } from './failure-error';

const waitAbort = (signal: AbortSignal) =>
  new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));

describe('layered deadline', () => {
  it('fires on inactivity when nothing touches it', async () => {
    const sut = createDeadline({ totalMs: 5000, idleMs: 20, label: 'stream' });
    await waitAbort(sut.signal);
    expect(sut.reason()).toMatchObject({ kind: 'timeout', message: 'stream sent nothing for 20 ms' });
    sut.dispose();
  });

  it('touching keeps it alive until the total limit', async () => {
    const sut = createDeadline({ totalMs: 80, idleMs: 30 });
    const t = setInterval(() => sut.touch(), 5);
    await waitAbort(sut.signal);
    clearInterval(t);
    expect(sut.reason()?.message).toBe('request took longer than 80 ms');
    sut.dispose();
  });

  it('a parent abort (task deadline) passes through, a plain one means cancelled', () => {
    const parent = new AbortController();
    const sut = createDeadline({ totalMs: 5000, parent: parent.signal });
    parent.abort(new FailureError('timeout', 'task deadline'));
    expect(sut.signal.aborted).toBe(true);
    expect(sut.reason()?.message).toBe('task deadline');
    const parent2 = new AbortController();
    const sut2 = createDeadline({ totalMs: 5000, parent: parent2.signal });
    parent2.abort();
    expect(sut2.reason()?.kind).toBe('cancelled');
    sut.dispose();
    sut2.dispose();
  });

  it('dispose stops the timers', async () => {
    const sut = createDeadline({ totalMs: 10, idleMs: 10 });
    sut.dispose();
    await new Promise((r) => setTimeout(r, 30));
    expect(sut.signal.aborted).toBe(false);
  });
});
