import type { PendingRequestView } from '@runledger/runtime';
import { answersOf, inputRequestKey, toInputRequest } from './mcp-task-mapping';

const pending = (over: Partial<PendingRequestView>): PendingRequestView => ({
  task_id: 'task_a',
  request_id: 'perm_1',
  kind: 'permission',
  call_id: 'call_1',
  tool: 'shell_exec',
  reason: 'writes a file',
  args: { command: 'touch x' },
  secret_name: null,
  covers: null,
  ...over,
});

describe('the Tasks extension mapping', () => {
  const permission = pending({});
  const form = pending({
    request_id: 'perm_2',
    tool: 'mcp__everything__ask',
    args: {
      message: 'Your name?',
      requested_schema: { type: 'object', properties: { name: { type: 'string' } } },
    },
  });
  const secret = pending({
    task_id: 'task_child',
    request_id: 'sec_1',
    kind: 'secret',
    secret_name: 'sudo_password',
    args: null,
  });

  it('turns each answer into the resolution it stands for, and records nothing for the rest', () => {
    expect(
      answersOf(
        {
          [inputRequestKey(permission)]: { action: 'accept', content: { decision: 'allow_always' } },
          [inputRequestKey(form)]: { action: 'accept', content: { name: 'Ada' } },
          [inputRequestKey(secret)]: { action: 'accept' },
          'task_a/perm_9': { action: 'accept', content: { decision: 'allow_once' } },
        },
        [permission, form, secret],
      ),
    ).toEqual([
      { kind: 'permission', task_id: 'task_a', request_id: 'perm_1', decision: 'allow_always' },
      {
        kind: 'permission',
        task_id: 'task_a',
        request_id: 'perm_2',
        decision: 'allow_once',
        content: { name: 'Ada' },
      },
      {
        kind: 'none',
        key: 'task_child/sec_1',
        why: 'a secret is provided at its URL, not through the protocol',
      },
      { kind: 'none', key: 'task_a/perm_9', why: 'not an outstanding request of this task' },
    ]);
    expect(answersOf({ 'task_a/perm_1': { action: 'decline' } }, [permission])).toEqual([
      { kind: 'permission', task_id: 'task_a', request_id: 'perm_1', decision: 'deny' },
    ]);
    expect(
      answersOf({ 'task_a/perm_1': { action: 'accept', content: { decision: 'sure' } } }, [permission])[0]
        .kind,
    ).toBe('none');
    expect(answersOf({ 'task_a/perm_1': { action: 'cancel' } }, [permission])[0].kind).toBe('none');
  });

  it('asks for a secret at its endpoint, never through the protocol', () => {
    expect(toInputRequest(secret, 'http://127.0.0.1:3000').params).toMatchObject({
      mode: 'url',
      elicitationId: 'task_child/sec_1',
      url: 'http://127.0.0.1:3000/tasks/task_child/secrets/sec_1',
    });
    expect(toInputRequest(form, '').params).toEqual({
      mode: 'form',
      message: 'Your name?',
      requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
    });
  });
});
