import { InMemoryEventStore } from '@runledger/event-store';
import { DEFAULT_DISCIPLINE_SETTINGS } from '../../discipline/settings';
import { ScriptedBackend } from '../../model/scripted-backend';
import { AllowAllPolicy, InMemoryToolRegistry, manifestOf, startTestRuntime } from '../../testing';

/** A tool that never settles and never looks at its signal, with a timeout far beyond the task's. */
const stuckTools = () =>
  new InMemoryToolRegistry().add(
    manifestOf('stuck', { description: 'Never returns.', timeout_ms: 600_000 }),
    () => new Promise(() => undefined),
  );

describe('a tool that ignores its abort does not hold its task', () => {
  let store: InMemoryEventStore;
  const start = () =>
    startTestRuntime({
      store: (store = new InMemoryEventStore()),
      tools: stuckTools(),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({
        orchestrator: [
          JSON.stringify({ type: 'tool', tool: 'stuck', args: {} }),
          '{"type":"respond","content":"x"}',
        ],
      }),
      discipline: DEFAULT_DISCIPLINE_SETTINGS,
    });

  it('the task stops at its time budget with timeout, the call recorded as stopped with it', async () => {
    const rt = await start();
    try {
      const started = Date.now();
      const { task_id } = await rt.runtime.submit(
        { input: 'go', budgets: { timeout_ms: 400 } },
        { source: 'api' },
      );
      const p = await rt.runtime.settled(task_id);
      expect(Date.now() - started).toBeLessThan(3000);
      expect(p.final).toMatchObject({ stop_reason: 'timeout' });
      const failed = (await store.readWholeStream(task_id)).find((e) => e.type === 'TOOL_FAILED');
      expect(failed?.payload).toMatchObject({
        tool: 'stuck',
        error_kind: 'tool_error',
        error: 'stuck stopped with its task: the task ran over its end-to-end time budget',
      });
    } finally {
      await rt.close();
    }
  });

  it('a cancel ends it at once', async () => {
    const rt = await start();
    try {
      const { task_id } = await rt.runtime.submit({ input: 'go' }, { source: 'api' });
      for (
        let i = 0;
        i < 200 && !(await store.readWholeStream(task_id)).some((e) => e.type === 'TOOL_CALLED');
        i++
      )
        await new Promise((r) => setTimeout(r, 10));
      const started = Date.now();
      await rt.runtime.cancel(task_id);
      const p = await rt.runtime.settled(task_id);
      expect(Date.now() - started).toBeLessThan(2000);
      expect(p.final).toMatchObject({ stop_reason: 'cancelled' });
    } finally {
      await rt.close();
    }
  });
});
