import { Message, Role, TaskState } from '@a2a-js/sdk';
import { RequestMalformedError } from '@a2a-js/sdk/errors';
import { RuntimeEvent, ToolManifest } from '@runledger/contracts';
import {
  a2aStateOf,
  a2aTaskOf,
  a2aUpdatesOf,
  answerOfMessage,
  dataPart,
  inputOfMessage,
  statusFilterOf,
  textPart,
} from './a2a-mapping';
import { buildAgentCard, buildExtendedAgentCard, isLegacyA2AVersion } from './agent-card';
import { scopeOfJsonRpc, scopeOfRest } from './a2a-scopes';
import { taskViewFromEvents } from '@runledger/runtime';

const usage = {
  rounds: 1,
  tool_calls: 0,
  model_calls: 0,
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  cost_usd: 0,
};
let seq = 0;
const ev = (type: string, payload: Record<string, unknown>): RuntimeEvent =>
  ({
    event_id: `evt_${++seq}`,
    task_id: 'task_1',
    session_id: 'sess_1',
    sequence: seq,
    position: seq,
    type,
    payload,
    causation_id: null,
    correlation_id: 'c',
    created_at: new Date(seq * 1000).toISOString(),
  }) as RuntimeEvent;
const received = () =>
  ev('TASK_RECEIVED', {
    input: 'run echo hi > f.txt',
    session_id: 'sess_1',
    accept_checks: [],
    budgets: {},
    idempotency_key: 'a2a:m-1',
    request_hash: null,
    source: 'api',
    forked_from: null,
  });
const asked = () =>
  ev('TASK_AWAITING_PERMISSION', {
    request_id: 'perm_1',
    call_id: 'call_1',
    tool: 'shell_exec',
    args: { command: 'echo hi > f.txt' },
    args_hash: 'h',
    rule: null,
    reason: 'writes a file',
  });
const message = (parts: Message['parts']): Message => ({
  messageId: 'm-1',
  contextId: '',
  taskId: '',
  role: Role.ROLE_USER,
  parts,
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

describe('A2A mapping', () => {
  beforeEach(() => (seq = 0));

  it('maps every status to an A2A state; a refusal before any round is rejected', () => {
    expect(a2aStateOf('queued', null, 0)).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(a2aStateOf('running', null, 0)).toBe(TaskState.TASK_STATE_WORKING);
    expect(a2aStateOf('awaiting_permission', null, 1)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(a2aStateOf('awaiting_secret', null, 1)).toBe(TaskState.TASK_STATE_AUTH_REQUIRED);
    expect(a2aStateOf('completed', 'completed', 1)).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(a2aStateOf('failed', 'tool_error', 1)).toBe(TaskState.TASK_STATE_FAILED);
    expect(a2aStateOf('failed', 'permission_denied', 0)).toBe(TaskState.TASK_STATE_REJECTED);
    expect(a2aStateOf('cancelled', 'cancelled', 1)).toBe(TaskState.TASK_STATE_CANCELED);
    expect(statusFilterOf(TaskState.TASK_STATE_INPUT_REQUIRED)).toBe('awaiting_permission');
    expect(statusFilterOf(TaskState.TASK_STATE_UNSPECIFIED)).toBeNull();
  });

  it('a waiting task is input-required with the request in its status message; history and metadata', () => {
    const view = taskViewFromEvents([
      received(),
      ev('ROUTER_DECIDED', { round: 1, directive: { type: 'respond', content: 'x' }, source: 'sys_util' }),
      asked(),
    ])!;
    const sut = a2aTaskOf(view, { input: 'run echo hi > f.txt', message_id: 'm-1' }, { historyLength: 1 });
    expect(sut.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(sut.status?.message?.parts[1].content).toEqual({
      $case: 'data',
      value: expect.objectContaining({
        kind: 'permission',
        request_id: 'perm_1',
        tool: 'shell_exec',
        decisions: ['allow_once', 'allow_always', 'deny', 'ask_always'],
      }),
    });
    expect(sut.history).toEqual([expect.objectContaining({ messageId: 'm-1', role: Role.ROLE_USER })]);
    expect(sut.metadata?.runledger).toMatchObject({ status: 'awaiting_permission', last_seq: 3 });
    expect(a2aTaskOf(view, { input: 'x', message_id: null }, { historyLength: 0 }).history).toEqual([]);
  });

  it('updates: one per change of state or request, and the answer as an artifact before the final status', () => {
    const events = [
      received(),
      ev('ROUTER_DECIDED', { round: 1, directive: { type: 'respond', content: 'x' }, source: 'sys_util' }),
      ev('CONTEXT_BUILT', { round: 1, sections: {}, total_tokens: 0, budget_tokens: 0 }),
      asked(),
      ev('PERMISSION_RESOLVED', {
        request_id: 'perm_1',
        call_id: 'call_1',
        decision: 'allow_once',
        args_hash: 'h',
        tool: 'shell_exec',
      }),
      ev('TASK_COMPLETED', { stop_reason: 'completed', detail: 'done', usage, result: 'hi' }),
    ];
    const sut = a2aUpdatesOf(events).map((u) => [u.seq, u.update.payload?.$case]);
    expect(sut).toEqual([
      [1, 'statusUpdate'],
      [2, 'statusUpdate'],
      [4, 'statusUpdate'],
      [5, 'statusUpdate'],
      [6, 'artifactUpdate'],
      [6, 'statusUpdate'],
    ]);
    expect(a2aUpdatesOf(events, 4).map((u) => u.seq)).toEqual([5, 6, 6]);
  });

  it("takes a message's text and data parts as the input; refuses files, empty text", () => {
    expect(inputOfMessage(message([textPart('hello'), dataPart({ a: 1 })]))).toBe('hello\n{"a":1}');
    const file = {
      content: { $case: 'url' as const, value: 'https://x' },
      metadata: undefined,
      filename: '',
      mediaType: '',
    };
    expect(() => inputOfMessage(message([file]))).toThrow(RequestMalformedError);
    expect(() => inputOfMessage(message([textPart('  ')]))).toThrow(/no text/);
    expect(() => inputOfMessage(undefined)).toThrow(/required/);
  });

  it('an answer is a data part naming the request: a decision or a secret', () => {
    expect(answerOfMessage(message([dataPart({ request_id: 'perm_1', decision: 'deny' })]))).toEqual({
      kind: 'permission',
      request_id: 'perm_1',
      decision: 'deny',
    });
    expect(answerOfMessage(message([dataPart({ request_id: 'sec_1', secret: 's3cret' })]))).toEqual({
      kind: 'secret',
      request_id: 'sec_1',
      secret: 's3cret',
    });
    expect(() => answerOfMessage(message([dataPart({ request_id: 'perm_1', decision: 'maybe' })]))).toThrow(
      /decision/,
    );
    expect(() => answerOfMessage(message([textPart('yes')]))).toThrow(/data part/);
  });

  it('the card names both bindings at the public URL and one skill per agent', () => {
    const card = buildAgentCard({
      baseUrl: 'https://agents.example.com/',
      version: '1',
      orchestratorModel: 'sys_util',
      agents: [{ name: 'coder', description: 'codes', models: {}, tools: null, instructions: '' }],
    });
    expect(card.supportedInterfaces.map((i) => [i.protocolBinding, i.url, i.protocolVersion])).toEqual([
      ['JSONRPC', 'https://agents.example.com/a2a/jsonrpc', '1.0'],
      ['HTTP+JSON', 'https://agents.example.com/a2a/rest', '1.0'],
      ['JSONRPC', 'https://agents.example.com/a2a/jsonrpc', '0.3'],
      ['HTTP+JSON', 'https://agents.example.com/a2a/rest', '0.3'],
    ]);
    expect(card.skills.map((s) => s.id)).toEqual(['orchestrator', 'agent:coder']);
    expect(card.capabilities?.extendedAgentCard).toBe(true);
  });

  it('the extended card adds a skill per tool and names the caller and its scopes', () => {
    const card = buildAgentCard({
      baseUrl: 'http://x',
      version: '1',
      orchestratorModel: 'sys_util',
      agents: [],
    });
    const tool = (name: string) => ({ name, description: `does ${name}` }) as ToolManifest;
    const sut = buildExtendedAgentCard(card, [tool('shell_exec'), tool('file_read')], {
      name: 'ci',
      scopes: ['tasks:read'],
    });
    expect(sut.skills.map((s) => s.id)).toEqual(['orchestrator', 'tool:file_read', 'tool:shell_exec']);
    expect(sut.description).toMatch(/for ci, whose token has the scopes tasks:read\.$/);
    expect(sut.supportedInterfaces).toEqual(card.supportedInterfaces);
  });

  it('A2A-Version: absent or 0.x is the 0.3 protocol', () => {
    expect([undefined, '', '0.3', ' 0.3 ', '1.0', '1.1'].map(isLegacyA2AVersion)).toEqual([
      true,
      true,
      true,
      true,
      false,
      false,
    ]);
  });

  it('scopes: a new message needs tasks:write, an answer approvals, reads tasks:read', () => {
    expect(scopeOfJsonRpc({ method: 'SendMessage', params: { message: {} } })).toBe('tasks:write');
    expect(scopeOfJsonRpc({ method: 'SendMessage', params: { message: { taskId: 't' } } })).toBe('approvals');
    expect(scopeOfJsonRpc({ method: 'GetTask' })).toBe('tasks:read');
    expect(scopeOfJsonRpc({ method: 'CancelTask' })).toBe('tasks:write');
    expect(scopeOfRest('POST', '/message:send', { message: { taskId: 't' } })).toBe('approvals');
    expect(scopeOfRest('GET', '/tasks/t', undefined)).toBe('tasks:read');
    expect(scopeOfRest('POST', '/tasks/t:cancel', undefined)).toBe('tasks:write');
    // 0.3 names
    expect(scopeOfJsonRpc({ method: 'message/send', params: { message: {} } })).toBe('tasks:write');
    expect(scopeOfJsonRpc({ method: 'message/stream', params: { message: { taskId: 't' } } })).toBe(
      'approvals',
    );
    expect(scopeOfJsonRpc({ method: 'tasks/get' })).toBe('tasks:read');
    expect(scopeOfJsonRpc({ method: 'agent/getAuthenticatedExtendedCard' })).toBe('tasks:read');
    expect(scopeOfJsonRpc({ method: 'tasks/cancel' })).toBe('tasks:write');
    expect(scopeOfJsonRpc({ method: 'tasks/pushNotificationConfig/set' })).toBe('tasks:write');
  });
});
