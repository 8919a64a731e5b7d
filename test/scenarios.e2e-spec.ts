import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  AcceptCheck,
  AgentProfile,
  Budgets,
  EventPayload,
  RuntimeEvent,
  STOP_REASONS,
  StopReason,
  ToolManifest,
  canonicalJson,
} from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { PermissionService } from '@runledger/permissions';
import {
  A2ARemoteAgents,
  DEFAULT_DISCIPLINE_SETTINGS,
  DisciplineSettings,
  ModelBackend,
  ModelScript,
  ScriptedBackend,
  SysUtilBackend,
  seededRandom,
} from '@runledger/runtime';
import {
  AllowAllPolicy,
  InMemoryToolRegistry,
  RuleTablePolicy,
  TestRuntime,
  manifestOf,
  startTestRuntime,
  testToolRegistry,
} from '@runledger/testing';

/**
 * Run-discipline scenarios with the scripted model: every stop reason at least
 * once, each guard both ways (the misbehaviour stopped, the legitimate run
 * left alone). Each asserts the exact stop reason, the number of rounds, and
 * that no malformed directive reached a tool.
 */

type Guard = EventPayload<'GUARD_TRIGGERED'>['guard'];
const j = (v: unknown) => JSON.stringify(v);
const tool = (name: string, args: Record<string, unknown>) => j({ type: 'tool', tool: name, args });
const respond = (content: string) => j({ type: 'respond', content });

const fast: DisciplineSettings = {
  ...DEFAULT_DISCIPLINE_SETTINGS,
  retry: { modelRetries: 2, toolRetries: 1, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 2000 },
  completionMaxMisses: 3,
  repeatThreshold: 2,
  circuitBreakerThreshold: 3,
};

const of = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], t: T) =>
  events.filter((e): e is Extract<RuntimeEvent, { type: T }> => e.type === t);
const guards = (events: RuntimeEvent[]): Guard[] => of(events, 'GUARD_TRIGGERED').map((e) => e.payload.guard);
const rounds = (events: RuntimeEvent[]) =>
  new Set(of(events, 'CONTEXT_BUILT').map((e) => e.payload.round)).size;

/** Every tool call ran a tool named by a validated ROUTER_DECIDED directive with exactly those args. */
function expectOnlyDecidedToolCalls(events: RuntimeEvent[]): void {
  const decided = new Set<string>();
  for (const e of of(events, 'ROUTER_DECIDED')) {
    const d = e.payload.directive;
    if (d.type === 'tool') decided.add(`${d.tool}:${canonicalJson(d.args)}`);
    if (d.type === 'plan')
      for (const s of d.steps) if (s.kind === 'tool') decided.add(`${s.tool}:${canonicalJson(s.args)}`);
  }
  for (const c of of(events, 'TOOL_CALLED'))
    expect(decided).toContain(`${c.payload.tool}:${canonicalJson(c.payload.args)}`);
}

describe('run discipline scenarios (scripted model)', () => {
  const seen = new Set<StopReason>();
  let dir: string;
  let store: InMemoryEventStore;
  let rt: TestRuntime;
  let tools: InMemoryToolRegistry;
  let flakyFailures: number;

  const m = (name: string, extra: Partial<ToolManifest> = {}): ToolManifest =>
    manifestOf(name, { timeout_ms: 5000, ...extra });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-scenarios-'));
    store = new InMemoryEventStore();
    flakyFailures = 0;
    tools = testToolRegistry(dir)
      .add(m('file_write'), async (a) => {
        await writeFile(resolve(dir, String(a.path)), String(a.content));
        return { bytes: String(a.content).length };
      })
      .add(m('net_fetch'), async () => {
        if (flakyFailures-- > 0) throw new Error('connection reset');
        return 'pong';
      });
  });
  afterEach(async () => {
    await rt?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function run(
    script: ModelScript,
    input: string,
    o: {
      budgets?: Budgets;
      accept_checks?: AcceptCheck[];
      permissions?: PermissionService;
      settings?: DisciplineSettings;
      modelTimeoutMs?: number;
      roundPolicy?: boolean;
      agents?: AgentProfile[];
      model?: ModelBackend;
    } = {},
  ) {
    rt = await startTestRuntime({
      agents: o.agents,
      remoteAgents: new A2ARemoteAgents({ attempts: 3, backoffMs: 5, maxBackoffMs: 10 }),
      store,
      tools,
      permissions: o.permissions ?? new AllowAllPolicy(),
      model: o.model ?? new ScriptedBackend(script),
      discipline: o.settings ?? fast,
      rng: seededRandom(42),
      modelTimeoutMs: o.modelTimeoutMs ?? 2000,
      roundPolicy: o.roundPolicy ?? false,
    });
    const { task_id } = await rt.runtime.submit(
      { input, budgets: o.budgets, accept_checks: o.accept_checks },
      { source: 'cli' },
    );
    const progress = await rt.runtime.settled(task_id);
    const events = await store.readWholeStream(task_id);
    expectOnlyDecidedToolCalls(events);
    const final = events[events.length - 1];
    expect(['TASK_COMPLETED', 'TASK_FAILED', 'TASK_CANCELLED']).toContain(final.type);
    const payload = final.payload as EventPayload<'TASK_FAILED'>;
    // usage on the final event is the task's own, and counts the rounds the log shows
    expect(payload.usage).toEqual(progress.usage);
    expect(payload.usage.rounds).toBe(rounds(events));
    expect(payload.detail.length).toBeGreaterThan(10);
    seen.add(payload.stop_reason as StopReason);
    return {
      task_id,
      progress,
      events,
      stop: payload.stop_reason as StopReason,
      detail: payload.detail,
      usage: payload.usage,
    };
  }

  const eight = Array.from({ length: 8 }, (_, i) =>
    tool('append_line', { path: 'log.txt', line: `line ${i + 1}` }),
  );

  describe('completed, and the legitimate long run no guard may stop', () => {
    it('8 different successful tool calls, then an answer: completed in 9 rounds, no guard fired', async () => {
      const r = await run({ orchestrator: [...eight, respond('wrote 8 lines')] }, 'write 8 lines');
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(9);
      expect(r.usage).toMatchObject({ rounds: 9, tool_calls: 8, model_calls: 9, failures: 0 });
      expect(guards(r.events)).toEqual([]);
    });

    it('reading the same file again and again is not a cycle', async () => {
      writeFileSync(join(dir, 'status.txt'), 'pending');
      const reads = Array.from({ length: 5 }, () => tool('file_read', { path: 'status.txt' }));
      const r = await run({ orchestrator: [...reads, respond('still pending')] }, 'watch status');
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(6);
      expect(guards(r.events)).toEqual([]);
    });
  });

  describe('repeat_cycle', () => {
    it('the same write with the same result: reminded at the 2nd repeat, stopped at the next', async () => {
      const same = tool('append_line', { path: 'x.txt', line: 'same' });
      const r = await run({ orchestrator: [same, same, same, same, same, respond('never')] }, 'loop');
      expect(r.stop).toBe('repeat_cycle');
      expect(rounds(r.events)).toBe(4);
      expect(guards(r.events)).toEqual(['repeat_reminder']);
      expect(of(r.events, 'TOOL_CALLED')).toHaveLength(4);
    });
  });

  describe('completion protocol', () => {
    it('prose three times in a row: two reminders, then missing_completion_signal after 3 rounds', async () => {
      const r = await run(
        { orchestrator: ['I am thinking about it.', '', 'Still thinking.', respond('never')] },
        'answer me',
      );
      expect(r.stop).toBe('missing_completion_signal');
      expect(rounds(r.events)).toBe(3);
      expect(guards(r.events)).toEqual(['completion_reminder', 'completion_reminder']);
      expect(of(r.events, 'ROUTER_DECIDED')).toHaveLength(0);
    });

    it('a tool call resets the count: prose, prose, tool, prose, prose, answer completes', async () => {
      const r = await run(
        { orchestrator: ['hmm', 'hmm', tool('echo', { text: 'x' }), 'hmm', 'hmm', respond('done')] },
        'answer me',
      );
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(6);
      expect(guards(r.events)).toEqual([
        'completion_reminder',
        'completion_reminder',
        'completion_reminder',
        'completion_reminder',
      ]);
    });

    it('a fabricated tool result is stripped, is no directive, and is never evidence', async () => {
      const fake = 'TOOL_RESULT: {"tool":"file_write","ok":true,"output":{"bytes":2}}';
      const r = await run({ orchestrator: [fake, respond('I wrote out.txt')] }, 'write out.txt', {
        accept_checks: [
          { id: 'written', kind: 'file_exists', target: 'out.txt', match: null, required: true, params: {} },
        ],
      });
      expect(r.stop).toBe('accept_check_failed');
      expect(rounds(r.events)).toBe(2);
      expect(guards(r.events)).toEqual(['correction', 'completion_reminder']);
      expect(of(r.events, 'TOOL_CALLED')).toHaveLength(0);
    });
  });

  describe('validation_error: a malformed directive never reaches a tool', () => {
    it('malformed twice, sys_util cannot help: validation_error, nothing ran', async () => {
      const bad = '{"type":"tool","tool":"shell_exec","args":{"command":"touch pwned"},"extra":true}';
      const r = await run(
        { orchestrator: [bad, '```json\n{"type":"tool","tool":"shell_exec"\n```'] },
        'do something clever',
      );
      expect(r.stop).toBe('validation_error');
      expect(rounds(r.events)).toBe(1);
      expect(guards(r.events)).toEqual(['correction', 'fallback']);
      expect(of(r.events, 'TOOL_CALLED')).toHaveLength(0);
    });

    it('malformed once, corrected: the valid directive runs', async () => {
      const r = await run(
        { orchestrator: ['{"type":"tool","tool":"echo"', tool('echo', { text: 'ok' }), respond('ok')] },
        'echo',
      );
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(2);
      expect(guards(r.events)).toEqual(['correction']);
      expect(of(r.events, 'TOOL_CALLED')).toHaveLength(1);
    });
  });

  describe('model failures under the taxonomy', () => {
    it('provider_error then success: one retry, recorded, completed', async () => {
      const r = await run({ orchestrator: [{ error: 'provider_error' }, respond('fine')] }, 'hello');
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(1);
      expect(guards(r.events)).toEqual(['retry']);
      expect(of(r.events, 'MODEL_CALLED').map((e) => e.payload.attempt)).toEqual([1, 2]);
    });

    it('provider_error on every attempt: 2 retries, sys_util fallback cannot help, provider_error', async () => {
      const r = await run(
        {
          orchestrator: [
            { error: 'provider_error' },
            { error: 'provider_error' },
            { error: 'provider_error' },
          ],
        },
        'write me a poem',
      );
      expect(r.stop).toBe('provider_error');
      expect(rounds(r.events)).toBe(1);
      expect(guards(r.events)).toEqual(['retry', 'retry', 'fallback']);
      expect(
        of(r.events, 'MODEL_CALLED')
          .filter((e) => e.payload.backend === 'scripted')
          .map((e) => e.payload.attempt),
      ).toEqual([1, 2, 3]);
    });

    it('rate_limited with Retry-After: waits at least that long each time, then rate_limited', async () => {
      const limited = { error: 'rate_limited' as const, retry_after_ms: 60 };
      const started = Date.now();
      const r = await run({ orchestrator: [limited, limited, limited] }, 'write me a poem');
      expect(Date.now() - started).toBeGreaterThanOrEqual(120);
      expect(r.stop).toBe('rate_limited');
      expect(rounds(r.events)).toBe(1);
      const retries = of(r.events, 'GUARD_TRIGGERED').filter((e) => e.payload.guard === 'retry');
      expect(retries.map((e) => e.payload.data.delay_ms)).toEqual([60, 60]);
    });

    it('rate_limited, then the fallback handles an input it understands: completed by sys_util', async () => {
      const limited = { error: 'rate_limited' as const, retry_after_ms: 5 };
      const r = await run(
        { orchestrator: [limited, limited, limited, respond('after fallback')] },
        'run echo via fallback',
      );
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(2);
      expect(of(r.events, 'ROUTER_DECIDED')[0].payload).toMatchObject({
        source: 'sys_util',
        fallback_reason: expect.stringContaining('rate_limited'),
      });
    });

    it('authentication_error: no retry, no fallback, stops at once', async () => {
      const r = await run(
        { orchestrator: [{ error: 'authentication_error' }, respond('never')] },
        'run echo hi',
      );
      expect(r.stop).toBe('authentication_error');
      expect(rounds(r.events)).toBe(1);
      expect(guards(r.events)).toEqual([]);
      expect(of(r.events, 'MODEL_CALLED')).toHaveLength(1);
    });

    it('timeout on every attempt of a slow model: timeout', async () => {
      const slow = { content: respond('late'), delay_ms: 1000 };
      const r = await run({ orchestrator: [slow, slow, slow] }, 'write me a poem', { modelTimeoutMs: 60 });
      expect(r.stop).toBe('timeout');
      expect(rounds(r.events)).toBe(1);
      expect(guards(r.events)).toEqual(['retry', 'retry', 'fallback']);
    });
  });

  describe('budgets', () => {
    it('max_rounds 3: the fourth round is refused with budget_exceeded', async () => {
      const r = await run({ orchestrator: eight }, 'many', { budgets: { max_rounds: 3 } });
      expect(r.stop).toBe('budget_exceeded');
      expect(rounds(r.events)).toBe(3);
    });

    it('max_tool_calls 2: the third call is refused before it runs (plan steps count too)', async () => {
      const plan = j({
        type: 'plan',
        steps: [1, 2, 3].map((i) => ({
          id: `s${i}`,
          kind: 'tool',
          tool: 'echo',
          args: { text: `${i}` },
          depends_on: i > 1 ? [`s${i - 1}`] : [],
        })),
      });
      const r = await run({ orchestrator: [plan, respond('never')] }, 'three echoes', {
        budgets: { max_tool_calls: 2 },
      });
      expect(r.stop).toBe('budget_exceeded');
      expect(r.detail).toMatch(/all 2 tool calls used/);
      expect(rounds(r.events)).toBe(1);
      expect(of(r.events, 'TOOL_CALLED')).toHaveLength(2);
    });

    it('max_model_calls 2 per role: the third orchestrator call is refused', async () => {
      const r = await run({ orchestrator: [eight[0], eight[1], eight[2], respond('never')] }, 'many', {
        budgets: { max_model_calls: 2 },
      });
      expect(r.stop).toBe('budget_exceeded');
      expect(r.detail).toMatch(/orchestrator role used all 2 model calls/);
      expect(rounds(r.events)).toBe(3);
      expect(r.usage.by_role.orchestrator.model_calls).toBe(2);
    });

    it('max_tokens: provider usage over the budget stops the task', async () => {
      const big = (content: string) => ({ content, usage: { prompt_tokens: 400, completion_tokens: 200 } });
      const r = await run({ orchestrator: [big(eight[0]), big(eight[1]), big(respond('x'))] }, 'spend', {
        budgets: { max_tokens: 1000 },
      });
      expect(r.stop).toBe('budget_exceeded');
      expect(r.detail).toMatch(/1200 tokens, over the budget of 1000/);
      expect(rounds(r.events)).toBe(2);
      expect(r.usage).toMatchObject({
        total_tokens: 1200,
        by_role: { orchestrator: { model_calls: 2, prompt_tokens: 800, completion_tokens: 400 } },
      });
    });

    /** three replies priced at $0.50 each against a budget of $0.80 */
    const spendOverCostBudget = () => {
      const settings = { ...fast, prices: { scripted: { input_per_mtok: 1000, output_per_mtok: 1000 } } };
      const big = (content: string) => ({ content, usage: { prompt_tokens: 300, completion_tokens: 200 } });
      return run({ orchestrator: [big(eight[0]), big(eight[1]), big(respond('x'))] }, 'spend', {
        settings,
        budgets: { max_cost_usd: 0.8 },
      });
    };

    it('max_cost_usd: cost priced from the table stops the task; cost is on every MODEL_RESPONDED', async () => {
      const r = await spendOverCostBudget();
      expect(r.stop).toBe('budget_exceeded');
      expect(rounds(r.events)).toBe(2);
      expect(of(r.events, 'MODEL_RESPONDED').map((e) => e.payload.cost_usd)).toEqual([0.5, 0.5]);
      expect(r.usage.cost_usd).toBeCloseTo(1.0, 9);
    });

    it('max_tokens: none of the tools of the reply that crossed the budget runs', async () => {
      const big = (content: string) => ({ content, usage: { prompt_tokens: 400, completion_tokens: 200 } });
      const step = (id: string) => ({
        id,
        kind: 'tool',
        tool: 'append_line',
        args: { path: 'log.txt', line: id },
      });
      const crossing = j({ type: 'plan', steps: [step('after a'), step('after b')] });
      const r = await run({ orchestrator: [big(eight[0]), big(crossing), big(respond('x'))] }, 'spend', {
        budgets: { max_tokens: 1000 },
      });
      expect(r.stop).toBe('budget_exceeded');
      expect(r.detail).toMatch(/1200 tokens, over the budget of 1000/);
      expect(rounds(r.events)).toBe(2);
      expect(of(r.events, 'TOOL_CALLED').map((e) => e.payload.args.line)).toEqual(['line 1']);
      expect(readFileSync(join(dir, 'log.txt'), 'utf8')).toBe('line 1\n');
    });

    it('max_cost_usd: the tool of the reply that crossed the budget does not run', async () => {
      const r = await spendOverCostBudget();
      expect(r.stop).toBe('budget_exceeded');
      expect(r.detail).toMatch(/over the budget of \$0.8/);
      expect(of(r.events, 'TOOL_CALLED')).toHaveLength(1);
      expect(readFileSync(join(dir, 'log.txt'), 'utf8')).toBe('line 1\n');
    });

    it('timeout_ms: the end-to-end deadline aborts the running tool and stops with timeout', async () => {
      const slowTool = tool('append_line', { path: 's.txt', line: 'x', delay_ms: 10_000 });
      const started = Date.now();
      const r = await run({ orchestrator: [slowTool, respond('late')] }, 'slow', {
        // long enough that a loaded machine's start does not use it up before the tool runs
        budgets: { timeout_ms: 800 },
      });
      expect(Date.now() - started).toBeLessThan(5000);
      expect(r.stop).toBe('timeout');
      expect(r.detail).toMatch(/end-to-end time budget/);
      expect(rounds(r.events)).toBe(1);
      expect(existsSync(join(dir, 's.txt'))).toBe(false);
    });
  });

  describe('prompt composition budget', () => {
    // ~1100 prompt tokens: system and tools take about half, so a few big tool results overflow it.
    const tight: DisciplineSettings = {
      ...fast,
      prompt: {
        ...fast.prompt,
        contextWindowTokens: 1200,
        maxTokens: 100,
        safetyMargin: 0,
        maxTrimItems: 0,
        keepRecentHistory: 1,
        summaryTokens: 40,
      },
    };
    const bigEchoes = Array.from({ length: 5 }, (_, i) => tool('echo', { text: `${i}`.repeat(500) }));

    it('over budget with a utility model: old rounds are compacted (recorded) and the run completes', async () => {
      const r = await run(
        {
          orchestrator: [...bigEchoes, respond('done')],
          utility: Array(10).fill('echoed five long strings'),
        },
        'echo a lot',
        { settings: tight },
      );
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(6);
      expect(guards(r.events)).toContain('compaction');
      expect(of(r.events, 'MODEL_CALLED').some((e) => e.payload.role === 'utility')).toBe(true);
      const built = of(r.events, 'CONTEXT_BUILT');
      expect(built[built.length - 1].payload.compacted).toBe(true);
      for (const b of built) expect(b.payload.total_tokens).toBeLessThanOrEqual(1100);
    });

    it('over budget without a utility model: the oldest rounds are trimmed, recorded in CONTEXT_BUILT', async () => {
      const r = await run({ orchestrator: [...bigEchoes, respond('done')] }, 'echo a lot', {
        settings: tight,
      });
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(6);
      expect(guards(r.events)).toEqual([]);
      expect(of(r.events, 'CONTEXT_BUILT').flatMap((e) => e.payload.cut)).toContain('history:round_1');
    });

    it('a tool that prints 60 KB: the default budget holds it elided, the run completes', async () => {
      const bulk = `${'x'.repeat(30_000)}${'y'.repeat(30_000)}`;
      tools.add(m('bulk_print'), async () => bulk);
      const r = await run({ orchestrator: [tool('bulk_print', {}), respond('printed')] }, 'print a lot', {
        settings: DEFAULT_DISCIPLINE_SETTINGS,
      });
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(2);
      const completed = of(r.events, 'TOOL_COMPLETED')[0];
      const built = of(r.events, 'CONTEXT_BUILT').map((e) => e.payload);
      expect(built[1].cut).toContain('history:round_1:elided');
      for (const b of built) expect(b.total_tokens).toBeLessThanOrEqual(b.budget_tokens);
      // round 2's prompt is within the budget; the log keeps the output whole
      const asked = of(r.events, 'MODEL_CALLED')[1].payload.prompt_chars;
      expect(asked).toBeLessThan(built[1].budget_tokens * 4);
      expect(completed.payload.result.output).toBe(bulk);
    });

    it('an input that cannot fit at all: budget_exceeded before any model call', async () => {
      const r = await run({ orchestrator: [respond('never')] }, 'x'.repeat(6000), { settings: tight });
      expect(r.stop).toBe('budget_exceeded');
      expect(r.detail).toMatch(/user input alone need \d+ tokens; the prompt budget is 1100/);
      expect(rounds(r.events)).toBe(0);
      expect(of(r.events, 'MODEL_CALLED')).toHaveLength(0);
    });
  });

  describe('tools: circuit breaker, idempotent retries', () => {
    it('3 consecutive breakages open the circuit; the 4th call is refused without running and stops with tool_error', async () => {
      flakyFailures = 10;
      const calls = [1, 2, 3, 4].map((i) => tool('net_fetch', { url: `https://x/${i}` }));
      const r = await run({ orchestrator: [...calls, respond('never')] }, 'fetch');
      expect(r.stop).toBe('tool_error');
      expect(rounds(r.events)).toBe(4);
      expect(guards(r.events)).toEqual(['circuit_breaker']);
      expect(of(r.events, 'TOOL_CALLED')).toHaveLength(3);
      expect(of(r.events, 'TOOL_FAILED')[3].payload.error).toMatch(/circuit open/);
    });

    it('an idempotent tool that breaks once is retried (recorded) and the task completes', async () => {
      let breaks = 1;
      tools.add(m('lookup', { idempotent: true }), async () => {
        if (breaks-- > 0) throw new Error('socket hang up');
        return 'found';
      });
      const r = await run({ orchestrator: [tool('lookup', { q: 'a' }), respond('found')] }, 'lookup');
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(2);
      expect(guards(r.events)).toEqual(['retry']);
      expect(of(r.events, 'TOOL_CALLED').map((e) => e.payload.attempt)).toEqual([1, 2]);
    });

    it('a timed-out tool signature gets twice the time next round (capped)', async () => {
      tools.add(
        // 150 ms of work: past the first timeout (100 ms), within the doubled one, by margins a loaded machine keeps
        m('slow_op', { timeout_ms: 100 }),
        (a, ctx) =>
          new Promise((res, rej) => {
            const t = setTimeout(() => res('done'), 150);
            ctx.signal.addEventListener('abort', () => (clearTimeout(t), rej(new Error('aborted'))), {
              once: true,
            });
          }),
      );
      const call = tool('slow_op', { n: 1 });
      const r = await run({ orchestrator: [call, call, respond('done in the end')] }, 'slow op');
      expect(r.stop).toBe('completed');
      expect(of(r.events, 'TOOL_FAILED').map((e) => e.payload.error)).toEqual(['timed out after 100 ms']);
      expect(of(r.events, 'TOOL_COMPLETED')).toHaveLength(1);
    });

    it('two breakages then a success: the circuit stays closed and the task completes', async () => {
      flakyFailures = 2;
      const calls = [1, 2, 3].map((i) => tool('net_fetch', { url: `https://x/${i}` }));
      const r = await run({ orchestrator: [...calls, respond('pong')] }, 'fetch');
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(4);
      expect(guards(r.events)).toEqual([]);
    });

    it('the orchestrator gives up after a tool failure: model_gave_up, with its reason', async () => {
      const r = await run(
        {
          orchestrator: [
            tool('file_read', { path: 'missing.txt' }),
            j({ type: 'fail', reason: 'cannot read' }),
          ],
        },
        'read',
      );
      expect(r.stop).toBe('model_gave_up');
      expect(r.detail).toBe('cannot read');
      expect(rounds(r.events)).toBe(2);
    });
  });

  describe('no model configured', () => {
    it('input sys_util cannot handle: not_understood, its help text the answer, nothing ran', async () => {
      const r = await run({}, 'What is the capital of France?', { model: new SysUtilBackend() });
      expect(r.stop).toBe('not_understood');
      expect(r.progress.status).toBe('failed');
      expect(r.progress.final?.result).toMatch(
        /^No model is configured, so I only understand these commands:/,
      );
      expect(of(r.events, 'TOOL_CALLED')).toEqual([]);
      expect(rounds(r.events)).toBe(1);
    });

    it('input it understands still completes', async () => {
      const r = await run({}, 'run echo understood', { model: new SysUtilBackend() });
      expect(r.stop).toBe('completed');
      expect(r.progress.final?.result).toContain('understood');
    });
  });

  describe('round policy', () => {
    it('a request that asks for no change: a write is refused once, then mutation_refused with the answer the runtime writes', async () => {
      const r = await run(
        {
          orchestrator: [
            tool('file_write', { path: 'out.txt', content: 'x' }),
            tool('file_write', { path: 'out.txt', content: 'x' }),
            j({ type: 'respond', content: 'I wrote out.txt' }),
          ],
        },
        'summarise the notes',
        { roundPolicy: true },
      );
      expect(r.stop).toBe('mutation_refused');
      expect(existsSync(join(dir, 'out.txt'))).toBe(false);
      expect(r.events[r.events.length - 1]).toMatchObject({ payload: { answer_source: 'runtime' } });
    });
  });

  describe('remote_unavailable', () => {
    it('a remote agent that refuses connections: retried, then the delegation and the task end remote_unavailable', async () => {
      // a port that was just listened on and closed: connection refused
      const server = createServer();
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      await new Promise((r) => server.close(r));
      const r = await run(
        {
          orchestrator: [
            j({ type: 'delegate', agent: 'far', input: 'do it over there' }),
            j({ type: 'fail', reason: 'the remote agent is down' }),
          ],
        },
        'ask far',
        {
          agents: [{ name: 'far', description: '', models: {}, tools: null, instructions: '', a2a: { url } }],
        },
      );
      expect(r.stop).toBe('remote_unavailable');
      expect(r.detail).toBe('the remote agent is down');
      expect(of(r.events, 'CHILD_TASK_ENDED')[0].payload).toMatchObject({
        status: 'failed',
        stop_reason: 'remote_unavailable',
        detail: expect.stringMatching(
          new RegExp(`^remote agent far at ${url} could not be reached after 3 attempts: .*fetch failed`),
        ),
      });
      expect(of(r.events, 'REMOTE_TASK_UPDATED')).toEqual([]);
      expect(rounds(r.events)).toBe(2);
    });
  });

  describe('accept gate', () => {
    const checks: AcceptCheck[] = [
      { id: 'file', kind: 'file_exists', target: 'out.txt', match: null, required: true, params: {} },
      {
        id: 'content',
        kind: 'content_contains',
        target: 'out.txt',
        match: 'hello',
        required: true,
        params: {},
      },
      { id: 'answer', kind: 'output_only', target: '', match: 'done', required: true, params: {} },
    ];

    it('all checks pass from recorded facts: completed, ACCEPTANCE_DECIDED lists each', async () => {
      const r = await run(
        { orchestrator: [tool('file_write', { path: 'out.txt', content: 'hello world' }), respond('done')] },
        'write',
        { accept_checks: checks },
      );
      expect(r.stop).toBe('completed');
      expect(rounds(r.events)).toBe(2);
      expect(of(r.events, 'ACCEPTANCE_DECIDED')[0].payload).toMatchObject({
        passed: true,
        results: checks.map((c) => expect.objectContaining({ id: c.id, passed: true })),
      });
    });

    it('a claim without evidence: accept_check_failed naming the failing check', async () => {
      const r = await run(
        { orchestrator: [tool('file_write', { path: 'out.txt', content: 'goodbye' }), respond('done')] },
        'write',
        { accept_checks: checks },
      );
      expect(r.stop).toBe('accept_check_failed');
      expect(r.detail).toMatch(/check content \(content_contains\)/);
      expect(rounds(r.events)).toBe(2);
      expect(of(r.events, 'ACCEPTANCE_DECIDED')[0].payload.results.map((x) => x.passed)).toEqual([
        true,
        false,
        true,
      ]);
    });
  });

  describe('permission_denied and cancelled', () => {
    it('a denied tool, then the orchestrator gives up: permission_denied', async () => {
      const r = await run(
        { orchestrator: [tool('echo', { text: 'x' }), j({ type: 'fail', reason: 'not allowed' })] },
        'deny',
        { permissions: new RuleTablePolicy({ echo: 'deny' }) },
      );
      expect(r.stop).toBe('permission_denied');
      expect(rounds(r.events)).toBe(2);
    });

    it('cancel during a slow tool: cancelled', async () => {
      rt = await startTestRuntime({
        store,
        tools,
        permissions: new AllowAllPolicy(),
        model: new ScriptedBackend({
          orchestrator: [tool('append_line', { path: 's.txt', line: 'x', delay_ms: 5000 })],
        }),
        discipline: fast,
      });
      const { task_id } = await rt.runtime.submit({ input: 'slow' }, { source: 'cli' });
      for (let i = 0; i < 200 && !of(await store.readWholeStream(task_id), 'TOOL_CALLED').length; i++)
        await new Promise((r) => setTimeout(r, 5));
      await rt.runtime.cancel(task_id);
      const p = await rt.runtime.settled(task_id);
      expect(p.final?.stop_reason).toBe('cancelled');
      expect(p.usage.rounds).toBe(1);
      seen.add('cancelled');
    });
  });

  describe('interrupted (double-texting)', () => {
    it('a second message with on_busy interrupt: the first stops after its running tool (interrupted), the second runs after it with it in its history', async () => {
      rt = await startTestRuntime({
        store,
        tools,
        permissions: new AllowAllPolicy(),
        model: new ScriptedBackend({
          orchestrator: [
            tool('append_line', { path: 'i.txt', line: 'first', delay_ms: 300 }),
            respond('second answered'),
          ],
        }),
        discipline: fast,
      });
      const first = await rt.runtime.submit({ input: 'slow first', session_id: 'chat' }, { source: 'api' });
      for (let i = 0; i < 200 && !of(await store.readWholeStream(first.task_id), 'TOOL_CALLED').length; i++)
        await new Promise((r) => setTimeout(r, 5));
      const second = await rt.runtime.submit(
        { input: 'never mind, do this', session_id: 'chat', on_busy: 'interrupt' },
        { source: 'api' },
      );
      const a = await rt.runtime.settled(first.task_id);
      expect(a.final?.stop_reason).toBe('interrupted');
      expect(a.status).toBe('cancelled');
      const aEvents = await store.readWholeStream(first.task_id);
      // the running tool finished (the safe point comes after it); no round after it
      expect(of(aEvents, 'TOOL_COMPLETED')).toHaveLength(1);
      expect(of(aEvents, 'INTERRUPT_REQUESTED').map((e) => e.payload.by_task_id)).toEqual([second.task_id]);
      expect(aEvents[aEvents.length - 1]).toMatchObject({
        type: 'TASK_CANCELLED',
        payload: { stop_reason: 'interrupted' },
      });
      expect(a.usage.rounds).toBe(1);
      for (let i = 0; i < 400 && !(await rt.runtime.progress(second.task_id)).final; i++)
        await new Promise((r) => setTimeout(r, 5));
      const b = await rt.runtime.settled(second.task_id);
      expect(b.final).toMatchObject({ stop_reason: 'completed', result: 'second answered' });
      const bEvents = await store.readWholeStream(second.task_id);
      expect(bEvents[0].payload).toMatchObject({ queued_behind: first.task_id, on_busy: 'interrupt' });
      const [turn] = of(bEvents, 'SESSION_TURN_BEGAN');
      expect(turn.payload.after_task_id).toBe(first.task_id);
      expect(turn.payload.session_history).toEqual([
        { task_id: first.task_id, input: 'slow first', answer: null, stop_reason: 'interrupted' },
      ]);
      // nothing of the second ran before the first ended
      expect(bEvents[1].position).toBeGreaterThan(aEvents[aEvents.length - 1].position);
      seen.add('interrupted');
    });
  });

  // Runs last (jest keeps file order): the scenarios above ended tasks with every canonical stop reason.
  it('covers every canonical stop reason', () => {
    expect(STOP_REASONS.filter((r) => !seen.has(r))).toEqual([]);
  });
});
