import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AnswerEvaluatorSettings, EventPayload, RuntimeEvent } from '@runledger/contracts';
import { ModelCritic } from '@runledger/critic';
import { SqliteEventStore } from '@runledger/event-store';
import { MemoryService, createCriticMemoryHook } from '@runledger/memory';
import { ModelRequest } from '../../model/model-backend';
import { ScriptItem, ScriptedBackend } from '../../model/scripted-backend';
import { criticModelOf } from '../../model/critic-model';
import { replayTask } from '../../runtime.module';
import { replayView } from '../../replay/replay-view';
import {
  RecordingRuntimeLogger,
  RuleTablePolicy,
  startTestRuntime,
  testToolRegistry,
} from '../../testing/index';
import { SqliteWithMemory, openSqliteWithMemory } from '../../testing/sqlite-memory';
import { DEFAULT_DISCIPLINE_SETTINGS } from '../../discipline/settings';
import { evaluatorSettingsOf } from './answer-evaluation';
import { TaskProgress, foldProgress } from '../../log/progress';

/**
 * Evaluate, then retry once, on a real SQLite log: the critic role's model scores the final answer,
 * a score below the threshold sends the model back once with the feedback, and the run replays
 * offline event for event, the evaluator's calls answered from the recording.
 */
describe('answer evaluation with one bounded retry (SQLite log)', () => {
  let dir: string;
  let opened: SqliteWithMemory;
  let store: SqliteEventStore;
  let memory: MemoryService;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-evaluation-'));
    opened = await openSqliteWithMemory(dir);
    ({ store, memory } = opened);
    writeFileSync(join(dir, 'notes.txt'), 'the build uses swc and jest');
  });
  afterEach(async () => {
    await opened.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** a scripted model that keeps the orchestrator's prompts */
  class PromptedModel extends ScriptedBackend {
    readonly prompts: string[] = [];
    override complete(request: ModelRequest) {
      if (request.role === 'orchestrator')
        this.prompts.push(request.messages.map((m) => m.content).join('\n'));
      return super.complete(request);
    }
  }
  const respond = (content: string) => JSON.stringify({ type: 'respond', content });
  const readNotes = JSON.stringify({ type: 'tool', tool: 'file_read', args: { path: 'notes.txt' } });
  const verdict = (score: number, feedback: string): ScriptItem => ({
    content: JSON.stringify({ score, feedback }),
    usage: { prompt_tokens: 120, completion_tokens: 30 },
  });
  const criticScore = (): ScriptItem => ({
    content: JSON.stringify({
      correctness: 0.9,
      usefulness: 0.8,
      safety: 1,
      memory_store: false,
      weight: 0.5,
      notes: 'ok',
    }),
    usage: { prompt_tokens: 80, completion_tokens: 20 },
  });
  const settings = (over: Partial<AnswerEvaluatorSettings> = {}): AnswerEvaluatorSettings => ({
    threshold: 0.7,
    max_tokens: 8000,
    criteria: 'name the tools the build uses',
    timeout_ms: 5000,
    ...over,
  });
  const prices = { scripted: { input_per_mtok: 1, output_per_mtok: 2 } };

  async function run(model: ScriptedBackend, evaluator: AnswerEvaluatorSettings | undefined, critic = false) {
    const rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new RuleTablePolicy({}),
      model,
      hooks: critic
        ? [createCriticMemoryHook({ critic: new ModelCritic(criticModelOf(model)!), memory })]
        : [],
      discipline: { ...DEFAULT_DISCIPLINE_SETTINGS, prices },
      ...(evaluator ? { answerEvaluator: evaluator } : {}),
    });
    const { task_id } = await rt.runtime.submit(
      { input: 'which tools does the build use?' },
      { source: 'cli' },
    );
    const progress = await rt.runtime.settled(task_id);
    await rt.close();
    return { task_id, progress, events: await store.readWholeStream(task_id) };
  }
  const payloads = <T extends RuntimeEvent['type']>(events: RuntimeEvent[], type: T) =>
    events.flatMap((e) => (e.type === type ? [e.payload as EventPayload<T>] : []));
  const replayMatches = async (taskId: string) => {
    const { events } = await replayTask(
      { store, tools: testToolRegistry(dir), logger: new RecordingRuntimeLogger() },
      taskId,
    );
    expect(replayView(events)).toEqual(replayView(await store.readWholeStream(taskId)));
    return events;
  };

  it('below the threshold: one retry with the feedback, the second answer ends the task; priced; replays offline', async () => {
    const model = new PromptedModel({
      orchestrator: [readNotes, respond('it uses some tools'), respond('swc and jest')],
      critic: [criticScore(), verdict(0.3, 'name the tools: the notes say which'), verdict(0.95, '')],
    });
    const { task_id, progress, events } = await run(model, settings(), true);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'swc and jest' });
    const evaluated = payloads(events, 'ANSWER_EVALUATED');
    expect(evaluated.map((e) => [e.attempt, e.score, e.passed, e.retry])).toEqual([
      [1, 0.3, false, true],
      [2, 0.95, true, false],
    ]);
    expect(evaluated[0]).toMatchObject({ threshold: 0.7, tokens: 150, error: null });
    const retry = payloads(events, 'GUARD_TRIGGERED').filter((g) => g.guard === 'answer_retry');
    expect(retry).toHaveLength(1);
    expect(retry[0].detail).toMatch(/scored your answer 0.3 \(below 0.7\): name the tools/);
    // the evaluator's calls are the critic role's, recorded and priced; its verdict follows its call
    const criticCalls = payloads(events, 'MODEL_RESPONDED').filter((r) => r.role === 'critic');
    expect(criticCalls).toHaveLength(3);
    expect(criticCalls[1]).toMatchObject({ cost_usd: (120 * 1 + 30 * 2) / 1e6 });
    expect(evaluated[0].call_id).toBe(criticCalls[1].call_id);
    expect(progress.usage.by_role.critic).toMatchObject({ model_calls: 3 });
    // the retried round saw the evaluation: the orchestrator's third prompt carries the feedback
    expect(model.prompts).toHaveLength(3);
    expect(model.prompts[1]).not.toMatch(/answer evaluator/);
    expect(model.prompts[2]).toMatch(/answer evaluator scored your answer 0.3 \(below 0.7\): name the tools/);
    await replayMatches(task_id);
  });

  it('below the threshold twice: still one retry, and the task ends with the second answer', async () => {
    const model = new ScriptedBackend({
      orchestrator: [respond('maybe vite'), respond('perhaps webpack')],
      critic: [verdict(0.2, 'read the notes'), verdict(0.1, 'still wrong')],
    });
    const { task_id, progress, events } = await run(model, settings());
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'perhaps webpack' });
    expect(payloads(events, 'ANSWER_EVALUATED').map((e) => [e.passed, e.retry])).toEqual([
      [false, true],
      [false, false],
    ]);
    await replayMatches(task_id);
  });

  it('off by default: no evaluation, no critic call, the first answer ends the task', async () => {
    const model = new ScriptedBackend({
      orchestrator: [respond('swc and jest')],
      critic: [verdict(0.1, 'never asked')],
    });
    const { progress, events } = await run(model, undefined);
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'swc and jest' });
    expect(events.some((e) => e.type === 'ANSWER_EVALUATED')).toBe(false);
    expect(payloads(events, 'MODEL_CALLED').map((c) => c.role)).toEqual(['orchestrator']);
  });

  it('an evaluator reply that is not a score is a verdict with an error: no retry, the answer stands', async () => {
    const model = new ScriptedBackend({
      orchestrator: [respond('swc and jest')],
      critic: [{ content: 'looks fine to me', usage: { prompt_tokens: 50, completion_tokens: 5 } }],
    });
    const { task_id, progress, events } = await run(model, settings());
    expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'swc and jest' });
    expect(payloads(events, 'ANSWER_EVALUATED')).toEqual([
      expect.objectContaining({
        score: null,
        passed: null,
        retry: false,
        error: expect.stringMatching(/not JSON/),
      }),
    ]);
    await replayMatches(task_id);
  });

  it("the evaluator's own budget: once its tokens are spent, the retried answer is not evaluated", async () => {
    const model = new ScriptedBackend({
      orchestrator: [respond('maybe vite'), respond('swc and jest')],
      critic: [verdict(0.2, 'read the notes'), verdict(0.9, 'never asked')],
    });
    const { progress, events } = await run(model, settings({ max_tokens: 100 }));
    expect(progress.final).toMatchObject({ result: 'swc and jest' });
    const evaluated = payloads(events, 'ANSWER_EVALUATED');
    expect(evaluated.map((e) => [e.score, e.retry, e.call_id === null])).toEqual([
      [0.2, true, false],
      [null, false, true],
    ]);
    expect(evaluated[1].error).toMatch(/budget of 100 tokens is spent \(150 used\)/);
    expect(payloads(events, 'MODEL_CALLED').filter((c) => c.role === 'critic')).toHaveLength(1);
  });
});

describe('evaluatorSettingsOf', () => {
  const agent = {
    name: 'writer',
    description: 'writes',
    models: {},
    tools: null,
    instructions: '',
  };
  const own = { threshold: 0.5, max_tokens: 100, criteria: '', timeout_ms: 1000 };
  const progress = (over: Partial<TaskProgress>) => ({ ...foldProgress('t', []), ...over });

  it("a delegated agent's answers follow its profile, not the orchestrator's settings", () => {
    const settings = { max_rounds: 5, discipline: null, answer_evaluator: own };
    expect(evaluatorSettingsOf(progress({ settings, agent }))).toBeNull();
    expect(
      evaluatorSettingsOf(progress({ settings, agent: { ...agent, evaluator: { ...own, threshold: 0.9 } } })),
    ).toMatchObject({ threshold: 0.9 });
    expect(evaluatorSettingsOf(progress({ settings, agent: null }))).toEqual(own);
    expect(
      evaluatorSettingsOf(progress({ settings: { max_rounds: 5, discipline: null }, agent: null })),
    ).toBeNull();
  });
});
