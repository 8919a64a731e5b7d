import { EventLogBuilder } from '../../../discipline/testing-events';
import { CircuitBreakerGate } from './circuit-breaker-gate';
import { callOf } from '../../../testing/gate-call';

describe('CircuitBreakerGate (threshold 3)', () => {
  const sut = new CircuitBreakerGate(3);
  const failing = (times: number) => {
    const log = new EventLogBuilder().received();
    for (let i = 0; i < times; i++) log.toolRound('net_fetch', { n: i }, null, false);
    return log;
  };

  it('given 3 failures of the tool in a row, when it is called again, then it is refused as tool_error without running', () => {
    const error = 'circuit open: net_fetch failed 3 times in a row in this task; not run';
    expect(sut.check(callOf(failing(3), 'net_fetch'))).toEqual({
      kind: 'deny',
      error,
      error_kind: 'tool_error',
      step_error: error,
    });
  });

  it('given 2 failures in a row, when the tool is called again, then it is allowed', () => {
    expect(sut.check(callOf(failing(2), 'net_fetch'))).toEqual({ kind: 'allow' });
  });

  it('given 3 failures then a success, when the tool is called again, then the circuit is closed', () => {
    expect(sut.check(callOf(failing(3).toolRound('net_fetch', { n: 9 }, 'pong'), 'net_fetch'))).toEqual({
      kind: 'allow',
    });
  });

  it('given another tool failed 3 times, when this tool is called, then it is allowed', () => {
    expect(sut.check(callOf(failing(3), 'echo'))).toEqual({ kind: 'allow' });
  });
});
