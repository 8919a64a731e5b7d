import { tmpdir } from 'node:os';
import { EventLogBuilder } from '../../../discipline/testing-events';
import { testToolRegistry } from '../../../testing';
import { ValidateGate } from './validate-gate';
import { callOf } from '../../../testing/gate-call';

describe('ValidateGate', () => {
  const sut = new ValidateGate(testToolRegistry(tmpdir()));
  const given = () => new EventLogBuilder().received();

  it('given a call whose args match the schema, when checked, then it is allowed', () => {
    const call = callOf(given(), 'append_line', { args: { path: 'a.txt', line: 'x' } });
    expect(sut.check(call)).toEqual({ kind: 'allow' });
  });

  it('given a call missing a required arg, when checked, then it is denied as validation_error', () => {
    const verdict = sut.check(callOf(given(), 'append_line', { args: { path: 'a.txt' } }));
    expect(verdict).toMatchObject({ kind: 'deny', error_kind: 'validation_error' });
    if (verdict.kind !== 'deny') throw new Error('expected deny');
    // the log names the tool; the step sees the schema's complaint alone
    expect(verdict.error).toBe(`invalid args for append_line: ${verdict.step_error}`);
    expect(verdict.step_error).toMatch(/line/);
  });
});
