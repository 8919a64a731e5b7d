import { StepStatus } from './graph';
import { ExecutionScheduler } from './execution-scheduler';
import { planStep as step } from './testing/plan-step';

describe('ExecutionScheduler', () => {
  const sut = new ExecutionScheduler({ stepConcurrency: 2 });

  it('parses plan JSON and names a dependency cycle', () => {
    const parsed = sut.parse('[{"id":"a","kind":"tool","tool":"echo"}]');
    expect(parsed).toEqual({ ok: true, steps: [step('a')] });
    expect(sut.cycle([step('a', ['b']), step('b', ['a'])])).toEqual(expect.arrayContaining(['a', 'b']));
    expect(sut.cycle([step('a'), step('b', ['a'])])).toBeNull();
  });

  it('starts no more steps than its step concurrency, and names the steps a failure blocks', () => {
    const steps = [step('a'), step('b'), step('c'), step('d', ['a'])];
    const status = new Map<string, StepStatus>([['a', 'running']]);
    expect(sut.ready(steps, status).map((s) => s.id)).toEqual(['b']);
    status.set('a', 'failed');
    expect(sut.blocked(steps, status).map((s) => s.id)).toEqual(['d']);
  });
});
