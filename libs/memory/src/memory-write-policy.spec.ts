import { CriticScore, RuntimeEvent } from '@runledger/contracts';
import {
  DEFAULT_MEMORY_POLICY,
  InsertDecision,
  NearestEntry,
  OutcomeTool,
  ToolOutcomeEvent,
  decide,
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
    text: 'read_file: abc',
    weight: 0.6,
    similarity: 0.99,
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
});
