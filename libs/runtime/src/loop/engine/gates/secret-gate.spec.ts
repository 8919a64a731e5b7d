import { EventLogBuilder } from '../../../discipline/testing-events';
import { SecretVault } from '../../../ports';
import { RuleTablePolicy } from '../../../testing';
import { SecretGate } from './secret-gate';
import { callOf } from '../../../testing/gate-call';

describe('SecretGate', () => {
  let vault: SecretVault;
  // shell_exec needs sudo_password by policy, beyond any manifest secret
  const sut = () => new SecretGate(new RuleTablePolicy({}, { shell_exec: ['sudo_password'] }), vault);
  const given = () => new EventLogBuilder().received();

  beforeEach(() => {
    vault = new SecretVault();
  });

  it('given a call that needs no secret, when checked, then it is allowed', () => {
    expect(sut().check(callOf(given(), 'echo'))).toEqual({ kind: 'allow' });
  });

  it('given a manifest secret not provided, when checked, then the task asks for it and waits', () => {
    const verdict = sut().check(callOf(given(), 'net_fetch', { manifest: { secrets: ['api_key'] } }));
    expect(verdict).toEqual({
      kind: 'suspend',
      events: [
        {
          type: 'TASK_AWAITING_SECRET',
          payload: {
            request_id: expect.stringMatching(/^sec_/),
            call_id: 'call_9',
            tool: 'net_fetch',
            secret_name: 'api_key',
            reason: 'net_fetch needs api_key',
          },
        },
      ],
    });
  });

  it('given a secret the policy requires, when checked, then it is asked for like a manifest secret', () => {
    const verdict = sut().check(callOf(given(), 'shell_exec'));
    expect(verdict.kind === 'suspend' && verdict.events[0].payload).toMatchObject({
      secret_name: 'sudo_password',
    });
  });

  it('given the request for this call and secret is already pending, when checked again, then it waits without asking twice', () => {
    const log = given().add('TASK_AWAITING_SECRET', {
      request_id: 'sec_1',
      call_id: 'call_9',
      tool: 'net_fetch',
      secret_name: 'api_key',
      reason: 'net_fetch needs api_key',
    });
    expect(sut().check(callOf(log, 'net_fetch', { manifest: { secrets: ['api_key'] } }))).toEqual({
      kind: 'suspend',
      events: [],
    });
  });

  it('given every secret is in the vault for this call, when checked, then it is allowed', () => {
    vault.put('task_1', 'call_9', 'api_key', 's3cret');
    expect(sut().check(callOf(given(), 'net_fetch', { manifest: { secrets: ['api_key'] } }))).toEqual({
      kind: 'allow',
    });
  });

  it('given the secret was provided for another call, when checked, then it is still asked for', () => {
    vault.put('task_1', 'call_1', 'api_key', 's3cret');
    const verdict = sut().check(callOf(given(), 'net_fetch', { manifest: { secrets: ['api_key'] } }));
    expect(verdict.kind).toBe('suspend');
  });
});
