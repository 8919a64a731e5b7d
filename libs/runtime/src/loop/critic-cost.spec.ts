import { Budgets, RuntimeEvent } from '@runledger/contracts';
import { CriticModel, ModelCritic, criticEvents, criticInputOf } from '@runledger/critic';
import { startTestRuntime, TestRuntime } from '../testing';
import { useTempStore } from '../testing/temp-store';
import { DEFAULT_DISCIPLINE_SETTINGS } from '../discipline/settings';
import { ScriptedBackend } from '../model/scripted-backend';
import { ToolOutcomeHook } from '../ports';
import { AllowAllPolicy, testToolRegistry } from '../testing';

const j = (v: unknown) => JSON.stringify(v);
const SCORE = j({
  correctness: 1,
  usefulness: 1,
  safety: 1,
  memory_store: false,
  weight: 0.5,
  notes: 'fine',
});

/** A critic model that reports 1000 prompt and 100 completion tokens per call. */
const criticModel: CriticModel = {
  model: 'critic-model',
  backend: 'fake',
  complete: async () => ({
    content: SCORE,
    usage: { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100, estimated: false },
  }),
};

/** The live critic hook without memory: score the outcome, record the critic's call and verdict. */
const criticHook: ToolOutcomeHook = async (ctx) => {
  const input = criticInputOf(ctx.event);
  return criticEvents(input, await new ModelCritic(criticModel).evaluate(input));
};

// $1000 per million prompt tokens, $2000 per million completion tokens: one critic call costs $1.20.
const settings = {
  ...DEFAULT_DISCIPLINE_SETTINGS,
  prices: { 'critic-model': { input_per_mtok: 1000, output_per_mtok: 2000 } },
};

describe("the critic's model calls cost what the price table says", () => {
  const temp = useTempStore('rl-critic-cost-', () => rt.close());
  let rt: TestRuntime;

  beforeEach(async () => {
    rt = await startTestRuntime({
      store: temp.store,
      tools: testToolRegistry(temp.dir),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({
        orchestrator: [
          j({ type: 'tool', tool: 'echo', args: { text: 'hi' } }),
          j({ type: 'respond', content: 'hi' }),
        ],
      }),
      hooks: [criticHook],
      discipline: settings,
    });
  });

  const run = async (budgets: Budgets = {}) => {
    const { task_id } = await rt.runtime.submit({ input: 'echo hi', budgets }, { source: 'cli' });
    const progress = await rt.runtime.settled(task_id);
    return { progress, events: await temp.store.readWholeStream(task_id) };
  };
  const criticResponse = (events: RuntimeEvent[]) =>
    events.find((e) => e.type === 'MODEL_RESPONDED' && e.payload.role === 'critic');

  it("records the critic call's cost and counts it in the task's usage", async () => {
    const { progress, events } = await run();

    expect(progress.final?.stop_reason).toBe('completed');
    expect(criticResponse(events)?.payload).toMatchObject({ cost_usd: expect.closeTo(1.2, 9) });
    expect(progress.usage.cost_usd).toBeCloseTo(1.2, 9);
    expect(progress.usage.by_role.critic).toMatchObject({ model_calls: 1, cost_usd: expect.closeTo(1.2, 9) });
  });

  it('a critic call that overruns max_cost_usd stops the task with budget_exceeded before the next round', async () => {
    const { progress, events } = await run({ max_cost_usd: 1 });

    expect(progress.final?.stop_reason).toBe('budget_exceeded');
    expect(progress.final?.detail).toMatch(/cost \$1\.200000, over the budget of \$1/);
    expect(events.filter((e) => e.type === 'CONTEXT_BUILT')).toHaveLength(1);
    expect(progress.usage.cost_usd).toBeCloseTo(1.2, 9);
  });
});
