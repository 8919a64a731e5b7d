import { MemoryService } from '@runledger/memory';
import { ModelBackend, ScriptedBackend } from '@runledger/runtime';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { ApiHarness, bootApi, waitForTask } from './api-harness';

/**
 * With RUNLEDGER_ERASURE=on a task's memory reaches only its own session and the entries written
 * for nobody: another session's memory texts are never copied into its events (CONTEXT_BUILT's
 * memory hits, memory_search's and memory_list's results), where erasing that session would not
 * reach them. With erasure off memory is shared across sessions.
 */
jest.setTimeout(60_000);

const SECRET = 'ZebraLovelace42';
const PUBLIC = 'OpenHarbor19';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Ev = { type: string; payload: any };

function reachSpec(env: () => Promise<Record<string, string>>): void {
  let h: ApiHarness | null = null;
  afterEach(async () => {
    await h?.close();
    h = null;
  });

  const boot = async (erasure: 'on' | 'off') =>
    bootApi(
      { RUNLEDGER_ERASURE: erasure, RUNLEDGER_MEMORY: 'on', RUNLEDGER_CRITIC: 'off', ...(await env()) },
      {
        // every task: search memory, list it, answer
        overrides: [
          [
            ModelBackend,
            new ScriptedBackend({
              orchestrator: [
                JSON.stringify({ type: 'tool', tool: 'memory_search', args: { query: 'the vault phrase' } }),
                JSON.stringify({ type: 'tool', tool: 'memory_list', args: { limit: 50 } }),
                JSON.stringify({ type: 'respond', content: 'noted' }),
              ],
            }),
          ],
        ],
        checkResponses: true,
      },
    );

  const run = async (server: ApiHarness, input: string, session_id: string) => {
    const res = await server.request('POST', '/tasks', { body: { input, session_id } });
    expect(res.status).toBe(202);
    expect((await waitForTask(server, res.body.task_id)).status).toBe('completed');
    const events = (await server.request('GET', `/tasks/${res.body.task_id}/events?limit=1000`)).body
      .events as Ev[];
    const context = events.filter((e) => e.type === 'CONTEXT_BUILT');
    const [search, list] = events.filter((e) => e.type === 'TOOL_COMPLETED');
    expect(context.length).toBeGreaterThan(0);
    expect([search.payload.tool, list.payload.tool]).toEqual(['memory_search', 'memory_list']);
    const texts = (hits: { text: string }[]) => hits.map((hit) => hit.text).join('\n');
    return {
      task_id: res.body.task_id as string,
      all: JSON.stringify(events),
      recalled: texts(context.flatMap((e) => e.payload.memory_hits)),
      searched: texts(search.payload.result.output.hits),
      listed: texts(list.payload.result.output.entries),
    };
  };

  /** a task of session A writes an entry naming the secret (as its memory_insert does); one is written for nobody */
  const seed = async (server: ApiHarness) => {
    const a = await run(server, 'remember the vault phrase', 'ses_a');
    const memory = server.app.get(MemoryService);
    const fact = { kind: 'fact' as const, source: 'user' as const, weight: 0.9, reason: 'seed' };
    const written = [
      await memory.remember({
        ...fact,
        text: `the vault phrase is ${SECRET}`,
        session_id: 'ses_a',
        task_id: a.task_id,
      }),
      await memory.remember({ ...fact, text: `the vault phrase for everyone is ${PUBLIC}` }),
    ];
    expect(written.map((w) => [w.op, w.entry.session_id])).toEqual([
      ['insert', 'ses_a'],
      ['insert', null],
    ]);
  };

  it('erasure on: a task of session B reaches only its own session and the entries of nobody', async () => {
    h = await boot('on');
    await seed(h);
    const b = await run(h, 'what is the vault phrase?', 'ses_b');
    for (const seen of [b.recalled, b.searched, b.listed]) expect(seen).toContain(PUBLIC);
    expect(b.all).not.toContain(SECRET);
    // session A's own later task still recalls, searches and lists what A stored
    const a = await run(h, 'what is the vault phrase?', 'ses_a');
    for (const seen of [a.recalled, a.searched, a.listed]) expect(seen).toContain(SECRET);
    expect(h.responseMismatches).toEqual([]);
  });

  it('erasure off: memory is shared across sessions', async () => {
    h = await boot('off');
    await seed(h);
    const b = await run(h, 'what is the vault phrase?', 'ses_b');
    for (const seen of [b.recalled, b.searched, b.listed]) {
      expect(seen).toContain(SECRET);
      expect(seen).toContain(PUBLIC);
    }
    expect(h.responseMismatches).toEqual([]);
  });
}

describe('memory reach with erasure (SQLite)', () => {
  reachSpec(async () => ({}));
});

describePostgres('memory reach with erasure (PostgreSQL)', () => {
  const pg = useTestPostgres();
  let schema: Awaited<ReturnType<typeof pg.freshSchema>> | null = null;
  afterEach(async () => {
    await schema?.dispose();
    schema = null;
  });
  reachSpec(async () => {
    schema = await pg.freshSchema({ migrate: false });
    return { RUNLEDGER_DB: schema.url, RUNLEDGER_PG_SCHEMA: schema.schema };
  });
});
