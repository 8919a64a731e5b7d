import {
  classifyOrchestratorText,
  completionStateFromEvents,
  completionStep,
  initialCompletionState,
  RoundOutcome,
  stripFabricatedResults,
} from './completion';
import { EventLogBuilder } from './testing-events';

describe('orchestrator text: directive, attempted directive, or no attempt', () => {
  it.each<[string, string | null, string, Record<string, unknown>]>([
    [
      'bare JSON directive',
      '{"type":"respond","content":"hi"}',
      'directive',
      { directive: { type: 'respond', content: 'hi' } },
    ],
    [
      'fenced JSON directive',
      'Here you go:\n```json\n{"type":"tool","tool":"echo","args":{"text":"a"}}\n```',
      'directive',
      { directive: { type: 'tool', tool: 'echo' } },
    ],
    ['JSON embedded in prose', 'I will answer now {"type":"respond","content":"ok"} thanks', 'directive', {}],
    [
      'broken JSON',
      '{"type":"tool","tool":"echo",',
      'attempted_directive',
      { error: expect.stringMatching(/not valid JSON/) },
    ],
    [
      'JSON of the wrong shape',
      '{"type":"launch","rocket":1}',
      'attempted_directive',
      { error: expect.stringMatching(/type/) },
    ],
    [
      'tool directive with an unknown field',
      '{"type":"tool","tool":"echo","args":{},"extra":1}',
      'attempted_directive',
      {},
    ],
    ['a fenced bash block meant to act', 'Run this:\n```bash\nrm -rf build\n```', 'attempted_directive', {}],
    [
      'fenced JSON that fails the schema',
      '```json\n{"type":"plan","steps":[]}\n```',
      'attempted_directive',
      {},
    ],
    ['plain prose', 'I think the file looks fine.', 'no_attempt', {}],
    ['empty', '', 'no_attempt', {}],
    ['null content', null, 'no_attempt', {}],
    [
      'prose around braces counts as an attempt (correction path, not a reminder)',
      'use a dict like {a: 1}',
      'attempted_directive',
      {},
    ],
    [
      'a reply cut off before its closing brace',
      'Here: {"type":"respond","content":"hal',
      'attempted_directive',
      {},
    ],
  ])('%s', (_n, text, kind, extra) => {
    const sut = classifyOrchestratorText(text);
    expect(sut.kind).toBe(kind);
    expect(sut).toMatchObject(extra);
  });

  it('a fabricated tool result alone is no attempt, and is stripped', () => {
    const sut = classifyOrchestratorText('TOOL_RESULT: {"ok":true,"output":"tests passed"}');
    expect(sut).toMatchObject({ kind: 'no_attempt', cleaned: '' });
    expect(sut.fabricated).toHaveLength(1);
  });

  it('a directive next to a fabricated result keeps the directive and drops the fabrication', () => {
    const sut = classifyOrchestratorText(
      'Observation: exit_code 0, all good\n\n{"type":"respond","content":"tests pass"}',
    );
    expect(sut).toMatchObject({ kind: 'directive', directive: { type: 'respond', content: 'tests pass' } });
    expect(sut.fabricated[0]).toMatch(/^Observation/);
    expect(sut.cleaned).not.toMatch(/Observation/);
  });
});

describe('stripFabricatedResults', () => {
  it.each([
    [
      'marker line block',
      'Plan: check.\nTOOL_RESULT: shell_exec\n{"exit_code":0}\n\nNext I answer.',
      'Plan: check.\n\nNext I answer.',
    ],
    ['tool_result tags', 'Before <tool_result>{"ok":true}</tool_result> after', 'Before  after'],
    ['result-labelled fence', 'x\n```tool_output\nall passed\n```\ny', 'x\n\ny'],
    ['ToolResult-shaped JSON fence', 'x\n```json\n{"tool":"shell_exec","ok":true,"output":"42"}\n```', 'x'],
    ['bare ToolResult-shaped JSON', '{"stdout":"hello","exit_code":0}', ''],
  ])('%s', (_n, text, cleaned) => {
    const sut = stripFabricatedResults(text);
    expect(sut.cleaned).toBe(cleaned);
    expect(sut.removed.length).toBeGreaterThan(0);
  });

  it.each([
    ['a directive', '{"type":"tool","tool":"shell_exec","args":{"command":"ls"}}'],
    ['prose mentioning results', 'The tool result earlier showed 3 files.'],
    ['an ordinary code fence', '```ts\nconst ok = true;\n```'],
  ])('leaves %s alone', (_n, text) => {
    expect(stripFabricatedResults(text)).toEqual({ cleaned: text, removed: [] });
  });
});

describe('completion protocol', () => {
  const run = (outcomes: RoundOutcome[], max = 3) => {
    let state = initialCompletionState();
    return outcomes.map((o) => {
      const v = completionStep(state, o, max);
      state = v.state;
      return v.action;
    });
  };

  it.each<[string, RoundOutcome[], string[]]>([
    [
      'prose 3 times in a row: remind, remind, stop',
      ['no_attempt', 'no_attempt', 'no_attempt'],
      ['remind', 'remind', 'stop'],
    ],
    [
      'a tool call resets the count',
      ['no_attempt', 'no_attempt', 'tool_call', 'no_attempt', 'no_attempt'],
      ['remind', 'remind', 'continue', 'remind', 'remind'],
    ],
    [
      '8 tool rounds: never reminded',
      Array<RoundOutcome>(8).fill('tool_call'),
      Array<string>(8).fill('continue'),
    ],
    [
      'an attempted directive (validation path) neither counts nor resets',
      ['no_attempt', 'other', 'no_attempt', 'no_attempt'],
      ['remind', 'continue', 'remind', 'stop'],
    ],
  ])('%s', (_n, outcomes, actions) => {
    expect(run(outcomes)).toEqual(actions);
  });
});

describe('completion state from the log', () => {
  it('counts reminders since the last tool call', () => {
    const log = new EventLogBuilder().received();
    const remind = () =>
      log.add('GUARD_TRIGGERED', {
        guard: 'completion_reminder',
        round: 1,
        detail: 'no directive',
        data: {},
      });
    remind();
    remind();
    expect(completionStateFromEvents(log.events)).toEqual({ misses: 2 });
    log.toolRound('echo', { text: 'x' }, 'x');
    remind();
    expect(completionStateFromEvents(log.events)).toEqual({ misses: 1 });
  });
});
