import { BUILT_IN_CODER, ModelToolCall } from '@runledger/contracts';
import {
  DELEGATE_FUNCTION,
  WAIT_FOR_SIGNAL_FUNCTION,
  WAIT_FUNCTION,
  timeFunctions,
  FAIL_FUNCTION,
  PLAN_FUNCTION,
  delegateFunction,
  directiveFromToolCalls,
  toolFunctions,
  toolTurn,
} from './native-tool-calls';
import { checkToolTurns } from '../model/tool-turns';

const KNOWN: Record<string, string[]> = { file_read: ['path'], shell_exec: ['command'] };
/** a registry of two tools, each with one required string argument */
const check = (tool: string, args: Record<string, unknown>): string | null => {
  if (!KNOWN[tool]) return `unknown tool "${tool}"`;
  const missing = KNOWN[tool].find((k) => typeof args[k] !== 'string');
  return missing ? `invalid args for ${tool}: ${missing} is required` : null;
};
const call = (id: string, name: string, args: unknown): ModelToolCall => ({
  id,
  name,
  arguments: typeof args === 'string' ? args : JSON.stringify(args),
});

describe('directiveFromToolCalls', () => {
  it('one tool call is a tool directive', () => {
    expect(directiveFromToolCalls([call('c1', 'file_read', { path: 'a' })], check)).toEqual({
      ok: true,
      directive: { type: 'tool', tool: 'file_read', args: { path: 'a' } },
    });
  });

  it('several calls are one plan of independent steps named by their call ids', () => {
    const out = directiveFromToolCalls(
      [call('c1', 'file_read', { path: 'a' }), call('c2', 'shell_exec', { command: 'ls' })],
      check,
    );
    expect(out).toMatchObject({
      ok: true,
      directive: {
        type: 'plan',
        steps: [
          { id: 'c1', kind: 'tool', tool: 'file_read', args: { path: 'a' }, depends_on: [] },
          { id: 'c2', kind: 'tool', tool: 'shell_exec', args: { command: 'ls' }, depends_on: [] },
        ],
      },
    });
  });

  it('the plan and fail functions become plan and fail directives', () => {
    const steps = [
      { id: 's1', kind: 'tool', tool: 'file_read', args: { path: 'a' } },
      { id: 's2', kind: 'respond', args: { content: '${steps.s1.output}' }, depends_on: ['s1'] },
    ];
    expect(directiveFromToolCalls([call('p', PLAN_FUNCTION, { steps })], check)).toMatchObject({
      ok: true,
      directive: { type: 'plan', steps: [{ id: 's1' }, { id: 's2', depends_on: ['s1'] }] },
    });
    expect(directiveFromToolCalls([call('f', FAIL_FUNCTION, { reason: 'no access' })], check)).toEqual({
      ok: true,
      directive: { type: 'fail', reason: 'no access' },
    });
  });

  it.each<[string, ModelToolCall[], RegExp]>([
    [
      'arguments that are not JSON',
      [call('c1', 'file_read', '{"path": a')],
      /c1\): arguments are not valid JSON/,
    ],
    [
      'arguments that are not an object',
      [call('c1', 'file_read', '["a"]')],
      /arguments must be a JSON object/,
    ],
    [
      'arguments failing the schema',
      [call('c1', 'file_read', { file: 'a' })],
      /invalid args for file_read: path/,
    ],
    ['an unknown tool', [call('c1', 'rm_rf', {})], /unknown tool "rm_rf"/],
    [
      'a plan with a missing dependency',
      [call('p', PLAN_FUNCTION, { steps: [{ id: 's1', kind: 'respond', depends_on: ['x'] }] })],
      /x/,
    ],
    ['a fail without a reason', [call('f', FAIL_FUNCTION, {})], /reason/],
    [
      'plan beside another call',
      [
        call('p', PLAN_FUNCTION, { steps: [{ id: 's1', kind: 'respond' }] }),
        call('c1', 'file_read', { path: 'a' }),
      ],
      /runledger_plan must be the only call/,
    ],
  ])('refuses %s, with one tool message per call for the correction turn', (_name, calls, error) => {
    const out = directiveFromToolCalls(calls, check);
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.error).toMatch(error);
    expect(out.answers.map((m) => (m.role === 'tool' ? m.tool_call_id : m.role))).toEqual(
      calls.map((c) => c.id),
    );
    // The correction turn is itself a well-formed tool turn.
    expect(checkToolTurns([{ role: 'assistant', content: '', tool_calls: calls }, ...out.answers]).ok).toBe(
      true,
    );
  });

  it('of several calls, the valid ones are told they were not run, the bad one what was wrong', () => {
    const out = directiveFromToolCalls(
      [call('c1', 'file_read', { path: 'a' }), call('c2', 'file_read', '{')],
      check,
    );
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.answers).toEqual([
      { role: 'tool', tool_call_id: 'c1', content: expect.stringMatching(/^not run: another call/) },
      {
        role: 'tool',
        tool_call_id: 'c2',
        content: expect.stringMatching(/^error: arguments are not valid JSON/),
      },
    ]);
  });
});

describe('toolTurn', () => {
  it('a lone call gets every result line of its round', () => {
    const turn = toolTurn([call('c1', 'file_read', { path: 'a' })], ['file_read: hello', 'note: keep going']);
    expect(turn).toEqual([
      { role: 'assistant', content: '', tool_calls: [call('c1', 'file_read', { path: 'a' })] },
      { role: 'tool', tool_call_id: 'c1', content: 'file_read: hello\nnote: keep going' },
    ]);
  });

  it('parallel calls get the lines of their own step; notes go with the last call; a call with nothing yet says so', () => {
    const calls = [call('c1', 'file_read', {}), call('c2', 'file_read', {}), call('c3', 'file_read', {})];
    const turn = toolTurn(calls, ['step c2 completed: two', 'step c1 failed: no such file', 'note: n']);
    expect(turn.slice(1)).toEqual([
      { role: 'tool', tool_call_id: 'c1', content: 'step c1 failed: no such file' },
      { role: 'tool', tool_call_id: 'c2', content: 'step c2 completed: two' },
      { role: 'tool', tool_call_id: 'c3', content: 'note: n' },
    ]);
    expect(checkToolTurns(turn)).toEqual({ ok: true, turns: 1 });
    expect(toolTurn([call('c1', 'x', {})], [])[1]).toMatchObject({ content: 'no result yet' });
  });
});

describe('toolFunctions', () => {
  it("offers each tool with its manifest's schema, then plan (the PlanStep[] schema) and fail", () => {
    const fns = toolFunctions([
      {
        name: 'file_read',
        description: 'read a file',
        args_schema: { type: 'object', properties: { path: { type: 'string' } } },
      } as never,
    ]);
    expect(fns.map((f) => f.name)).toEqual(['file_read', PLAN_FUNCTION, FAIL_FUNCTION]);
    expect(fns[0]).toEqual({
      name: 'file_read',
      description: 'read a file',
      parameters: { type: 'object', properties: { path: { type: 'string' } } },
    });
    expect(fns[1].parameters).toMatchObject({
      type: 'object',
      required: ['steps'],
      properties: {
        steps: {
          type: 'array',
          items: {
            properties: {
              kind: { enum: ['tool', 'coder', 'memory', 'respond', 'agent', 'wait', 'wait_for_signal'] },
            },
          },
        },
      },
    });
  });
});

describe('runledger_delegate', () => {
  const delegate = (id: string, args: unknown) => ({
    id,
    name: DELEGATE_FUNCTION,
    arguments: JSON.stringify(args),
  });
  const anyArgs = () => null;

  it('is offered with the agents as an enum and their descriptions, and not at all without agents', () => {
    expect(delegateFunction([])).toEqual([]);
    const [fn] = delegateFunction([BUILT_IN_CODER]);
    expect(fn.name).toBe(DELEGATE_FUNCTION);
    expect(fn.description).toContain(`- coder: ${BUILT_IN_CODER.description}`);
    expect(fn.parameters).toMatchObject({
      required: ['agent', 'input'],
      properties: { agent: { type: 'string', enum: ['coder'] } },
    });
  });

  it('one call is a delegate directive; several (with tool calls) are a plan whose agent steps run side by side', () => {
    expect(directiveFromToolCalls([delegate('c1', { agent: 'coder', input: 'fix it' })], anyArgs)).toEqual({
      ok: true,
      directive: { type: 'delegate', agent: 'coder', input: 'fix it' },
    });
    const two = directiveFromToolCalls(
      [
        delegate('c1', { agent: 'coder', input: 'part one' }),
        delegate('c2', { agent: 'coder', input: 'part two', budgets: { max_tokens: 500 } }),
        { id: 'c3', name: 'file_read', arguments: '{"path":"a"}' },
      ],
      anyArgs,
    );
    expect(two.ok && two.directive).toMatchObject({
      type: 'plan',
      steps: [
        { id: 'c1', kind: 'agent', tool: null, args: { agent: 'coder', input: 'part one' }, depends_on: [] },
        { id: 'c2', kind: 'agent', args: { budgets: { max_tokens: 500 } } },
        { id: 'c3', kind: 'tool', tool: 'file_read' },
      ],
    });
  });

  it('bad delegation arguments get a correction turn naming the field', () => {
    const out = directiveFromToolCalls([delegate('c1', { agent: 'coder' })], anyArgs);
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.error).toContain('input');
    expect(out.answers[0]).toMatchObject({ role: 'tool', tool_call_id: 'c1' });
  });
});

describe('runledger_wait', () => {
  const wait = (id: string, args: unknown) => ({ id, name: WAIT_FUNCTION, arguments: JSON.stringify(args) });
  const anyArgs = () => null;

  it('is offered beside the tools', () => {
    expect(timeFunctions().map((f) => f.name)).toEqual([WAIT_FUNCTION, WAIT_FOR_SIGNAL_FUNCTION]);
  });

  it('a call is a wait directive, for a duration or until a time', () => {
    expect(directiveFromToolCalls([wait('w1', { duration_ms: 500 })], anyArgs)).toEqual({
      ok: true,
      directive: { type: 'wait', duration_ms: 500 },
    });
    expect(directiveFromToolCalls([wait('w1', { until: '2030-01-01T00:00:00Z' })], anyArgs)).toEqual({
      ok: true,
      directive: { type: 'wait', until: '2030-01-01T00:00:00Z' },
    });
  });

  it('both or neither of duration_ms and until, or a call beside others, get a correction turn', () => {
    const both = directiveFromToolCalls(
      [wait('w1', { duration_ms: 5, until: '2030-01-01T00:00:00Z' })],
      anyArgs,
    );
    expect(both.ok).toBe(false);
    const neither = directiveFromToolCalls([wait('w1', {})], anyArgs);
    expect(neither.ok).toBe(false);
    const beside = directiveFromToolCalls(
      [wait('w1', { duration_ms: 5 }), { id: 'c2', name: 'file_read', arguments: '{}' }],
      anyArgs,
    );
    expect(beside).toMatchObject({ ok: false, error: expect.stringContaining('must be the only call') });
  });
});

describe('runledger_wait_for_signal', () => {
  const wait = (id: string, args: unknown) => ({
    id,
    name: WAIT_FOR_SIGNAL_FUNCTION,
    arguments: JSON.stringify(args),
  });
  const anyArgs = () => null;

  it('a call is a wait_for_signal directive, with or without a timeout', () => {
    expect(directiveFromToolCalls([wait('s1', { name: 'ci.done' })], anyArgs)).toEqual({
      ok: true,
      directive: { type: 'wait_for_signal', name: 'ci.done' },
    });
    expect(directiveFromToolCalls([wait('s1', { name: 'paid', timeout_ms: 60_000 })], anyArgs)).toEqual({
      ok: true,
      directive: { type: 'wait_for_signal', name: 'paid', timeout_ms: 60_000 },
    });
  });

  it('a bad name, a zero timeout, or a call beside others get a correction turn', () => {
    expect(directiveFromToolCalls([wait('s1', { name: '-x' })], anyArgs).ok).toBe(false);
    expect(directiveFromToolCalls([wait('s1', { name: 'ci', timeout_ms: 0 })], anyArgs).ok).toBe(false);
    const beside = directiveFromToolCalls(
      [wait('s1', { name: 'ci' }), { id: 'c2', name: 'file_read', arguments: '{}' }],
      anyArgs,
    );
    expect(beside).toMatchObject({ ok: false, error: expect.stringContaining('must be the only call') });
  });
});
