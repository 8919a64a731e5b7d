import { PermissionCheck, hashArgs } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { EventLogBuilder } from '../../../discipline/testing-events';
import { RuleTablePolicy } from '../../../testing';
import { AllowAlwaysGrants } from '../allow-always-grants';
import { PermissionGate } from './permission-gate';
import { callOf } from '../../../testing/gate-call';

describe('PermissionGate', () => {
  const args = { command: 'ls' };
  const argsHash = hashArgs('shell_exec', args);
  let store: InMemoryEventStore;
  const sut = (verdict: PermissionCheck['verdict']) =>
    new PermissionGate(new RuleTablePolicy({ shell_exec: verdict }), new AllowAlwaysGrants(store));
  const given = () => new EventLogBuilder().received();
  const awaiting = (log: EventLogBuilder, hash = argsHash) =>
    log.add('TASK_AWAITING_PERMISSION', {
      request_id: 'perm_1',
      call_id: 'call_9',
      tool: 'shell_exec',
      args,
      args_hash: hash,
      rule: 'tool:shell_exec',
      reason: 'shell_exec is prompt',
    });
  const resolved = (log: EventLogBuilder, decision: 'allow_once' | 'deny', hash = argsHash) =>
    awaiting(log, hash).add('PERMISSION_RESOLVED', {
      request_id: 'perm_1',
      call_id: 'call_9',
      decision,
      args_hash: hash,
      tool: 'shell_exec',
    });

  beforeEach(() => {
    store = new InMemoryEventStore();
  });

  it('given the policy allows the tool, when checked, then it is allowed', async () => {
    expect(await sut('allow').check(callOf(given(), 'shell_exec', { args }))).toEqual({ kind: 'allow' });
  });

  it('given a hard_stop rule, when checked, then the task stops as permission_denied and the call is recorded', async () => {
    expect(await sut('hard_stop').check(callOf(given(), 'shell_exec', { args }))).toEqual({
      kind: 'hard_stop',
      reason: 'shell_exec is hard_stop',
      stop_reason: 'permission_denied',
      recordFailure: true,
    });
  });

  it('given a deny rule, when checked, then the call fails as permission_denied', async () => {
    expect(await sut('deny').check(callOf(given(), 'shell_exec', { args }))).toEqual({
      kind: 'deny',
      error: 'shell_exec is deny',
      error_kind: 'permission_denied',
      step_error: 'permission denied: shell_exec is deny',
    });
  });

  it('given a prompt rule and no decision, when checked, then the task asks, bound to the call and its args hash', async () => {
    expect(await sut('prompt').check(callOf(given(), 'shell_exec', { args }))).toEqual({
      kind: 'suspend',
      events: [
        {
          type: 'TASK_AWAITING_PERMISSION',
          payload: {
            request_id: expect.stringMatching(/^perm_/),
            call_id: 'call_9',
            tool: 'shell_exec',
            args,
            args_hash: argsHash,
            rule: 'tool:shell_exec',
            reason: 'shell_exec is prompt',
            covers:
              'allow always: shell_exec, commands matching the configured rule, for this session (rule tool:shell_exec)',
          },
        },
      ],
    });
  });

  it('given an allowed step that asks for confirmation, when checked, then the task asks', async () => {
    const verdict = await sut('allow').check(
      callOf(given(), 'shell_exec', { args, requiresConfirmation: true }),
    );
    expect(verdict.kind === 'suspend' && verdict.events.map((e) => e.type)).toEqual([
      'TASK_AWAITING_PERMISSION',
    ]);
  });

  it('given the request for this call is pending, when checked again, then it waits without asking twice', async () => {
    expect(await sut('prompt').check(callOf(awaiting(given()), 'shell_exec', { args }))).toEqual({
      kind: 'suspend',
      events: [],
    });
  });

  it('given the user allowed this call once, when checked, then it is allowed', async () => {
    const call = callOf(resolved(given(), 'allow_once'), 'shell_exec', { args });
    expect(await sut('prompt').check(call)).toEqual({ kind: 'allow' });
  });

  it('given the user denied this call, when checked, then it fails as denied by the user', async () => {
    const call = callOf(resolved(given(), 'deny'), 'shell_exec', { args });
    expect(await sut('prompt').check(call)).toMatchObject({ kind: 'deny', error: 'denied by the user' });
  });

  it('given a decision made for other args of the call, when checked, then the task asks again', async () => {
    const call = callOf(resolved(given(), 'allow_once', 'other-hash'), 'shell_exec', { args });
    const verdict = await sut('prompt').check(call);
    expect(verdict.kind === 'suspend' && verdict.events.map((e) => e.type)).toEqual([
      'TASK_AWAITING_PERMISSION',
    ]);
  });

  it('given an allow_always for the tool and rule in the session, when checked, then it is allowed without asking', async () => {
    await store.append(
      'task_0',
      [
        {
          type: 'TASK_AWAITING_PERMISSION',
          session_id: 'ses_1',
          payload: {
            request_id: 'perm_0',
            call_id: 'call_1',
            tool: 'shell_exec',
            args: {},
            args_hash: 'h',
            rule: 'tool:shell_exec',
            reason: 'asked',
          },
        },
        {
          type: 'PERMISSION_RESOLVED',
          session_id: 'ses_1',
          payload: {
            request_id: 'perm_0',
            call_id: 'call_1',
            decision: 'allow_always',
            args_hash: 'h',
            tool: 'shell_exec',
          },
        },
      ],
      { expected: 'no_stream' },
    );
    expect(await sut('prompt').check(callOf(given(), 'shell_exec', { args }))).toEqual({ kind: 'allow' });
  });
});
