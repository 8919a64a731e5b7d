import { EventLogBuilder } from '../../../discipline/testing-events';
import { InterruptedCallGate } from './interrupted-call-gate';
import { callOf } from '../../../testing/gate-call';

describe('InterruptedCallGate', () => {
  const sut = new InterruptedCallGate();
  /** a log whose last call (call_1) has an intent and no outcome: the process stopped while it ran */
  const interrupted = () =>
    new EventLogBuilder().received().add('TOOL_CALLED', {
      call_id: 'call_1',
      tool: 'net_fetch',
      args: {},
      args_hash: 'h',
      step_id: null,
      idempotent: false,
      attempt: 1,
    });

  it('given a call never started before, when checked, then it is allowed', () => {
    expect(sut.check(callOf(interrupted(), 'net_fetch', { call_id: 'call_2' }))).toEqual({ kind: 'allow' });
  });

  it('given an interrupted call of a non-idempotent tool, when checked again, then it fails as outcome_unknown', () => {
    expect(sut.check(callOf(interrupted(), 'net_fetch', { call_id: 'call_1' }))).toEqual({
      kind: 'deny',
      error_kind: 'outcome_unknown',
      error: expect.stringMatching(/outcome is unknown and it was not run again/),
      step_error: expect.stringMatching(/outcome is unknown/),
    });
  });

  it('given an interrupted call of an idempotent tool, when checked again, then it may run again', () => {
    const call = callOf(interrupted(), 'net_fetch', { call_id: 'call_1', manifest: { idempotent: true } });
    expect(sut.check(call)).toEqual({ kind: 'allow' });
  });
});
