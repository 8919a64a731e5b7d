import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { HeuristicCritic } from '@runledger/critic';
import { createCriticMemoryHook } from '@runledger/memory';
import { ScriptedBackend } from '../model/scripted-backend';
import {
  AllowAllPolicy,
  HoldingFinals,
  InMemoryToolRegistry,
  manifestOf,
  startTestRuntime,
} from '../testing';
import { SqliteWithMemory, openSqliteWithMemory } from '../testing/sqlite-memory';

const ANSWER = 'the shared answer to every question here is forty-two';
const plan = JSON.stringify({
  type: 'plan',
  steps: [{ id: 's1', kind: 'tool', tool: 'answer', args: {} }],
});
const respond = JSON.stringify({ type: 'respond', content: 'done' });

describe('a task that starts while others commit their ends (SQLite log and memory)', () => {
  let dir: string;
  let opened: SqliteWithMemory;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-handed-'));
    opened = await openSqliteWithMemory(dir);
  });
  afterEach(async () => {
    await opened.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('deduplicates against their memory writes before they commit: it reinforces, it stores no copy', async () => {
    const store = new HoldingFinals(opened.store);
    const rt = await startTestRuntime({
      store,
      tools: new InMemoryToolRegistry().add(
        manifestOf('answer', { read_only: true, idempotent: true }),
        async () => ANSWER,
      ),
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend(
        { orchestrator: Array.from({ length: 3 }, () => [plan, respond]).flat() },
        { answersInProcess: true },
      ),
      hooks: [createCriticMemoryHook({ critic: new HeuristicCritic(), memory: opened.memory })],
      concurrency: 2,
    });
    try {
      const ids: string[] = [];
      for (const input of ['first', 'second', 'third'])
        ids.push((await rt.runtime.submit({ input }, { source: 'api' })).task_id);
      // the two slots' tasks hand their ends over and wait; the third runs in the slot one of them gave up
      for (let i = 0; i < 2000 && store.arrivals.length < 3; i++) await new Promise((r) => setTimeout(r, 5));
      expect(store.arrivals).toHaveLength(3);
      expect(await opened.memory.list({}, 10)).toEqual([]);
      store.releaseAll();
      const ends = await Promise.all(ids.map((id) => rt.runtime.settled(id)));
      expect(ends.map((p) => p.final?.stop_reason)).toEqual(['completed', 'completed', 'completed']);
      const writes = async (id: string) =>
        (await opened.store.readWholeStream(id)).flatMap((e: RuntimeEvent) =>
          e.type === 'MEMORY_WRITTEN' ? [e.payload.op] : [],
        );
      const [first, second, third] = await Promise.all(ids.map(writes));
      // the first two ran side by side, each before the other handed anything over
      expect([...first, ...second]).toContain('insert');
      // the third saw their writes on their way to the log
      expect(third).toEqual(['reinforce']);
      await opened.memory.sync();
      const stored = (await opened.memory.list({}, 10)).filter((e) => e.text.includes(ANSWER));
      expect(stored.length).toBeLessThanOrEqual(2);
    } finally {
      store.releaseAll();
      await rt.close();
    }
  });
});
