import { CriticScore, RuntimeEvent } from '@runledger/contracts';
import {
  DEFAULT_MEMORY_POLICY,
  InsertDecision,
  NearestEntry,
  OutcomeTool,
  ToolOutcomeEvent,
  decide,
  decideAtEnd,
  dedupe,
} from './memory-write-policy';

const envelope = {
  event_id: 'evt_out',
  task_id: 'task_1',
  session_id: 's1',
  sequence: 5,
  position: 9,
  causation_id: null,
  correlation_id: 'task_1',
  created_at: '2026-01-01T00:00:00Z',
};
const completed = (output: unknown, ok = true): ToolOutcomeEvent =>
  ({
    ...envelope,
    type: 'TOOL_COMPLETED',
    payload: {
      call_id: 'c1',
      tool: 'read_file',
      result: { tool: 'read_file', ok, output, error: ok ? null : 'bad', metadata: {} },
      duration_ms: 3,
    },
  }) as RuntimeEvent as ToolOutcomeEvent;
const failed = (
  error_kind: 'tool_error' | 'permission_denied' | 'timeout' = 'tool_error',
): ToolOutcomeEvent =>
  ({
    ...envelope,
    type: 'TOOL_FAILED',
    payload: {
      call_id: 'c1',
      tool: 'read_file',
      result: null,
      error: 'ENOENT: no such file notes.txt',
      error_kind,
      duration_ms: 3,
    },
  }) as RuntimeEvent as ToolOutcomeEvent;
const tool = (over: Partial<OutcomeTool> = {}): OutcomeTool => ({
  name: 'read_file',
  sensitive_output: false,
  secrets: [],
  ...over,
});
const score = (over: Partial<CriticScore> = {}): CriticScore => ({
  correctness: 0.9,
  usefulness: 0.8,
  safety: 1,
  memory_store: true,
  weight: 0.6,
  notes: 'fine',
  ...over,
});

describe('decide', () => {
  it.each<[string, ToolOutcomeEvent, OutcomeTool, CriticScore | null, Record<string, unknown>]>([
    [
      'good output -> tool_result with the critic weight',
      completed('the build uses swc'),
      tool(),
      score(),
      {
        op: 'insert',
        kind: 'tool_result',
        source: 'tool',
        weight: 0.6,
        text: 'read_file: the build uses swc',
      },
    ],
    [
      'structured output is stored as JSON',
      completed({ files: ['a.ts'] }),
      tool(),
      score(),
      { op: 'insert', text: 'read_file: {"files":["a.ts"]}' },
    ],
    [
      'the text field of a structured output is stored',
      completed({ path: 'a.txt', content: 'hello', bytes: 5 }),
      tool(),
      score(),
      { op: 'insert', text: 'read_file: hello' },
    ],
    [
      'stdout of a command',
      completed({ exit_code: 0, stdout: 'v20.1\n', stderr: '' }),
      tool(),
      score(),
      { op: 'insert', text: 'read_file: v20.1' },
    ],
    [
      'no critic score (critic failed) -> none',
      completed('x'),
      tool(),
      null,
      { op: 'none', reason: 'no critic score' },
    ],
    [
      'critic says do not store -> none',
      completed('x'),
      tool(),
      score({ memory_store: false }),
      { op: 'none' },
    ],
    [
      'sensitive output -> none',
      completed('x'),
      tool({ sensitive_output: true }),
      score(),
      { op: 'none', reason: 'tool output is marked sensitive' },
    ],
    [
      'tool with secrets -> none',
      completed('x'),
      tool({ secrets: ['GITHUB_TOKEN'] }),
      score(),
      { op: 'none', reason: 'tool runs with secrets' },
    ],
    [
      'memory tool -> none',
      completed('x'),
      tool({ name: 'memory_search' }),
      score(),
      { op: 'none', reason: 'memory tool outcome' },
    ],
    ['unsafe -> none', completed('x'), tool(), score({ safety: 0.2 }), { op: 'none' }],
    ['too light -> none', completed('x'), tool(), score({ weight: 0.1 }), { op: 'none' }],
    [
      'low quality -> none',
      completed('x'),
      tool(),
      score({ correctness: 0.2, usefulness: 0.3 }),
      { op: 'none' },
    ],
    ['empty output -> none', completed('   '), tool(), score(), { op: 'none', reason: 'empty output' }],
    [
      'a command that printed nothing -> none (its exit code and flags are no knowledge)',
      completed({ exit_code: 0, stdout: '', stderr: '  ', truncated: false }),
      tool(),
      score(),
      { op: 'none', reason: 'empty output' },
    ],
    [
      'a command that printed only to stderr -> its stderr',
      completed({ exit_code: 0, stdout: '', stderr: 'warning: low disk', truncated: false }),
      tool(),
      score(),
      { op: 'insert', kind: 'tool_result', text: 'read_file: warning: low disk' },
    ],
    [
      'a structured output without text fields -> its JSON',
      completed({ bytes: 12, path: 'a.txt' }),
      tool(),
      score(),
      { op: 'insert', kind: 'tool_result', text: 'read_file: {"bytes":12,"path":"a.txt"}' },
    ],
    [
      'secret-looking output -> none',
      completed('OPENAI_API_KEY=sk-abcdefghijklmnop1234567890'),
      tool(),
      score(),
      { op: 'none', reason: 'text looks like it holds a secret' },
    ],
    ['redacted output -> none', completed('token is [REDACTED]'), tool(), score(), { op: 'none' }],
    [
      'private key -> none',
      completed('-----BEGIN RSA PRIVATE KEY-----\nMII'),
      tool(),
      score(),
      { op: 'none' },
    ],
    [
      'tool error -> critique lesson',
      failed(),
      tool(),
      score({ correctness: 0, usefulness: 0.6, weight: 0.4, notes: 'file missing' }),
      {
        op: 'insert',
        kind: 'critique',
        source: 'critic',
        weight: 0.4,
        text: 'read_file failed: ENOENT: no such file notes.txt (critic: file missing)',
      },
    ],
    [
      'ok:false result -> critique lesson',
      completed(null, false),
      tool(),
      score({ usefulness: 0.6 }),
      { op: 'insert', kind: 'critique' },
    ],
    ['permission denied -> none', failed('permission_denied'), tool(), score(), { op: 'none' }],
    ['useless failure -> none', failed(), tool(), score({ usefulness: 0.1 }), { op: 'none' }],
  ])('%s', (_name, event, t, s, expected) => {
    expect(decide(event, t, s, DEFAULT_MEMORY_POLICY)).toMatchObject(expected);
  });

  it('failures are skipped when configured so', () => {
    expect(
      decide(failed(), tool(), score({ usefulness: 0.9 }), {
        ...DEFAULT_MEMORY_POLICY,
        store_failures: false,
      }),
    ).toEqual({ op: 'none', reason: 'failures are not stored' });
  });

  it('thresholds are configurable', () => {
    expect(
      decide(completed('x'), tool(), score({ weight: 0.1 }), { ...DEFAULT_MEMORY_POLICY, min_weight: 0.05 }),
    ).toMatchObject({ op: 'insert', weight: 0.1 });
  });

  it('clips long text', () => {
    const d = decide(completed('y'.repeat(5000)), tool(), score(), {
      ...DEFAULT_MEMORY_POLICY,
      max_text_chars: 100,
    });
    expect(d.op === 'insert' && d.text.length).toBe(100);
  });
});

describe('dedupe', () => {
  const candidate: InsertDecision = {
    op: 'insert',
    kind: 'tool_result',
    source: 'tool',
    weight: 0.5,
    text: 'read_file: abc',
    reason: 'r',
  };
  const near = (over: Partial<NearestEntry> = {}): NearestEntry => ({
    entry_id: 'mem_1',
    kind: 'tool_result',
    weight: 0.6,
    similarity: 0.99,
    committed: true,
    ...over,
  });

  it.each<[string, NearestEntry | null, Record<string, unknown>]>([
    ['nothing stored -> insert', null, { op: 'insert' }],
    ['far -> insert', near({ similarity: 0.5 }), { op: 'insert' }],
    ['near, other kind -> insert', near({ kind: 'critique' }), { op: 'insert' }],
    [
      'near duplicate -> reinforce the existing entry',
      near(),
      { op: 'reinforce', entry_id: 'mem_1', weight: 0.7, previous_weight: 0.6 },
    ],
    [
      'heavier candidate lifts from its own weight',
      near({ weight: 0.2 }),
      { op: 'reinforce', weight: 0.6, previous_weight: 0.2 },
    ],
    ['capped at 1', near({ weight: 0.95 }), { op: 'reinforce', weight: 1 }],
    ['already at 1 -> none', near({ weight: 1 }), { op: 'none' }],
  ])('%s', (_name, nearest, expected) => {
    expect(dedupe(candidate, nearest, DEFAULT_MEMORY_POLICY)).toMatchObject(expected);
  });

  it('a reinforce copies no text of the entry; of a write not committed yet, it keeps its own', () => {
    const committed = dedupe({ ...candidate, text: 'read_file: abd' }, near(), DEFAULT_MEMORY_POLICY);
    expect(committed).toEqual({
      op: 'reinforce',
      entry_id: 'mem_1',
      kind: 'tool_result',
      weight: 0.7,
      previous_weight: 0.6,
      reason: 'near-duplicate (cosine 0.99) of mem_1',
    });
    expect(
      dedupe({ ...candidate, text: 'read_file: abd' }, near({ committed: false }), DEFAULT_MEMORY_POLICY),
    ).toEqual({ ...committed, text: 'read_file: abd' });
  });
});

describe('decideAtEnd', () => {
  let seq = 0;
  const ev = (type: string, payload: unknown) =>
    ({ ...envelope, event_id: `evt_${++seq}`, sequence: seq, type, payload }) as unknown as RuntimeEvent;
  const received = ev('TASK_RECEIVED', { input: 'count the files', session_id: 's1' });
  const steps = [
    {
      id: 's1',
      kind: 'tool',
      tool: 'shell_exec',
      args: { command: 'ls | wc -l' },
      description: '',
      requires_confirmation: false,
      depends_on: [],
    },
    {
      id: 's2',
      kind: 'respond',
      tool: null,
      args: {},
      description: 'report',
      requires_confirmation: false,
      depends_on: ['s1'],
    },
  ];
  const started = ev('PLAN_STARTED', { plan_id: 'p1', steps });
  const done = (status: string) =>
    ev('PLAN_COMPLETED', {
      plan_id: 'p1',
      step_results: [
        { step_id: 's1', status: 'completed' },
        { step_id: 's2', status },
      ],
    });

  const decided = (source: string) =>
    ev('ROUTER_DECIDED', { round: 1, directive: { type: 'respond', content: 'x' }, source, attempts: 1 });
  const called = (tool: string) => ev('TOOL_CALLED', { call_id: `c${seq}`, tool, args: {} });
  const memoryStep = (id: string, tool: string) => ({ ...steps[0], id, tool, args: { text: 'x' } });
  const memoryPlan = ev('PLAN_STARTED', {
    plan_id: 'p2',
    steps: [memoryStep('m1', 'memory_insert'), memoryStep('m2', 'memory_search')],
  });
  const memoryPlanDone = ev('PLAN_COMPLETED', {
    plan_id: 'p2',
    step_results: [
      { step_id: 'm1', status: 'completed' },
      { step_id: 'm2', status: 'completed' },
    ],
  });

  it.each<[string, RuntimeEvent[], 'completed' | 'tool_error', string | null, Record<string, unknown>[]]>([
    [
      'completed with a plan -> plan and summary',
      [received, started, done('completed')],
      'completed',
      '12 files',
      [
        {
          kind: 'plan',
          weight: 0.4,
          text: 'plan for "count the files": shell_exec({"command":"ls | wc -l"}) -> respond: report',
        },
        { kind: 'summary', weight: 0.5, text: 'task "count the files" -> 12 files' },
      ],
    ],
    [
      'a plan with a failed step is not kept',
      [received, started, done('failed')],
      'completed',
      '12 files',
      [{ kind: 'summary' }],
    ],
    ['a failed task leaves nothing', [received, started, done('completed')], 'tool_error', null, []],
    ['an empty result leaves no summary', [received], 'completed', '  ', []],
    ['a secret-looking result is not kept', [received], 'completed', 'token=abcdefghijkl', []],
    [
      'a task that only used memory tools leaves nothing (its result is memory already)',
      [received, called('memory_search')],
      'completed',
      'memory_search: {"hits":[{"id":"mem_1","text":"the deploy key rotates on fridays"}]}',
      [],
    ],
    [
      'a plan of memory steps only is not kept either',
      [received, memoryPlan, called('memory_insert'), called('memory_search'), memoryPlanDone],
      'completed',
      'memory_insert: {"id":"mem_2"}',
      [],
    ],
    [
      'a reply the model-less sys_util gave without running anything is its help text: nothing',
      [received, decided('sys_util')],
      'completed',
      'No model is configured, so I only understand these commands: ...',
      [],
    ],
    [
      'a model that answers without tools leaves its answer',
      [received, decided('orchestrator')],
      'completed',
      '12 files',
      [{ kind: 'summary' }],
    ],
    [
      'sys_util that ran a tool leaves the summary',
      [received, decided('sys_util'), called('shell_exec'), decided('sys_util')],
      'completed',
      'shell_exec: 12',
      [{ kind: 'summary', text: 'task "count the files" -> shell_exec: 12' }],
    ],
    [
      'a memory tool beside another tool still leaves the summary',
      [received, called('memory_search'), called('shell_exec')],
      'completed',
      '12 files',
      [{ kind: 'summary', text: 'task "count the files" -> 12 files' }],
    ],
  ])('%s', (_name, events, stop, result, expected) => {
    const out = decideAtEnd(events, stop, result, DEFAULT_MEMORY_POLICY);
    expect(out).toHaveLength(expected.length);
    out.forEach((d, i) => expect(d).toMatchObject(expected[i]));
  });

  it('weights of 0 turn summaries and plans off', () => {
    expect(
      decideAtEnd([received, started, done('completed')], 'completed', 'x', {
        ...DEFAULT_MEMORY_POLICY,
        summary_weight: 0,
        plan_weight: 0,
      }),
    ).toEqual([]);
  });
});
