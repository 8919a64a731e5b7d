import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ModelBackend, ModelScript, ScriptedBackend } from '@runledger/runtime';
import { ApiHarness, TOKENS, bootApi, waitForTask } from './api-harness';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Ev = { event_id: string; type: string; sequence: number; causation_id: string | null; payload: any };

const FACT = 'the launch code word is marmalade';
const FILES = ['alpha.txt', 'beta.txt', 'gamma.txt', 'delta.txt'];
const score = (weight: number) =>
  JSON.stringify({
    correctness: 0.9,
    usefulness: 0.9,
    safety: 1,
    memory_store: true,
    weight,
    notes: 'a fact worth keeping',
  });

/** what the servers below answered that the OpenAPI document does not describe */
const mismatches: ApiHarness['responseMismatches'] = [];

async function withScript(
  script: unknown,
  env: Record<string, string> = {},
): Promise<{ h: ApiHarness; dispose: () => Promise<void> }> {
  // the composition's model (every role, the critic's too) is swapped for the script, nothing else
  const h = await bootApi(env, {
    overrides: [[ModelBackend, new ScriptedBackend(script as ModelScript)]],
    checkResponses: true,
  });
  return {
    h,
    dispose: async () => {
      mismatches.push(...h.responseMismatches);
      await h.close();
    },
  };
}

async function runTask(
  h: ApiHarness,
  input: string,
  session_id: string,
): Promise<{ task: { status: string }; events: Ev[]; task_id: string }> {
  const res = await h.request('POST', '/tasks', { body: { input, session_id } });
  expect(res.status).toBe(202);
  const task = await waitForTask(h, res.body.task_id);
  const events = (await h.request('GET', `/tasks/${res.body.task_id}/events?limit=1000`)).body.events as Ev[];
  return { task, events, task_id: res.body.task_id };
}

const ofType = (events: Ev[], type: string) => events.filter((e) => e.type === type);
/** memory written from tool outcomes (the critic path), apart from the summary and plan a completed task leaves */
const outcomeWrites = (events: Ev[]) =>
  ofType(events, 'MEMORY_WRITTEN').filter((e) => ['tool_result', 'critique'].includes(e.payload.kind));

describe('memory through the API with a scripted model', () => {
  it('a second task recalls what the first stored, reinforces it, and an admin can search and delete it', async () => {
    const { h, dispose } = await withScript(
      {
        // each task's orchestrator calls are numbered from 0, so both tasks follow this script
        orchestrator: [
          JSON.stringify({ type: 'tool', tool: 'file_read', args: { path: 'facts.txt' } }),
          JSON.stringify({ type: 'respond', content: 'noted' }),
        ],
        critic: [score(0.6), score(0.6)],
      },
      // as `npm start` runs: the memory rows are written on the writer thread's connection
      { RUNLEDGER_SQLITE_WRITER_THREAD: 'on' },
    );
    try {
      writeFileSync(join(h.workspace, 'facts.txt'), FACT);
      const first = await runTask(h, `remember this: ${FACT}`, 'session-a');
      expect(first.task.status).toBe('completed');
      const [critic] = ofType(first.events, 'CRITIC_RESULT');
      expect(critic.payload).toMatchObject({ critic: 'model', error: null, score: { weight: 0.6 } });
      const [written] = outcomeWrites(first.events);
      const toolDone = ofType(first.events, 'TOOL_COMPLETED')[0];
      expect(written.payload).toMatchObject({
        op: 'insert',
        kind: 'tool_result',
        text: `file_read: ${FACT}`,
        weight: 0.6,
        source_event_id: toolDone.event_id,
        embedding_model: 'runledger-hash-v1',
      });
      expect(written.causation_id).toBe(critic.event_id);
      const entryId = written.payload.entry_id as string;

      // another session, a question sharing the words: the first task's entry is in its context
      const second = await runTask(h, 'what is the launch code word?', 'session-b');
      expect(second.task.status).toBe('completed');
      const firstContext = ofType(second.events, 'CONTEXT_BUILT')[0];
      expect(firstContext.payload.memory_hits.map((m: { id: string }) => m.id)).toContain(entryId);
      // the same fact again: the existing entry gets heavier instead of a copy being stored
      expect(outcomeWrites(second.events).map((e) => e.payload)).toEqual([
        expect.objectContaining({ op: 'reinforce', entry_id: entryId, previous_weight: 0.6, weight: 0.7 }),
      ]);
      // it names the entry: session-a's text is not copied into session-b's events
      expect(outcomeWrites(second.events)[0].payload).not.toHaveProperty('text');

      const found = await h.request('GET', '/memory?query=launch%20code%20word&kind=tool_result&k=3');
      expect(found.status).toBe(200);
      expect(found.body.entries[0]).toMatchObject({
        id: entryId,
        weight: 0.7,
        task_id: first.task_id,
        session_id: 'session-a',
        kind: 'tool_result',
      });
      expect(found.body.entries[0].score).toBeCloseTo(found.body.entries[0].similarity * 0.7, 6);
      expect((await h.request('GET', '/memory?session_id=session-b&kind=tool_result')).body.entries).toEqual(
        [],
      );
      // each completed task also left its summary
      expect(
        (await h.request('GET', '/memory?kind=summary')).body.entries
          .map((e: { text: string }) => e.text)
          .sort(),
      ).toEqual([`task "remember this: ${FACT}" -> noted`, 'task "what is the launch code word?" -> noted']);

      for (const [path, status] of [
        ['/memory?k=0', 400],
        ['/memory?k=abc', 400],
        ['/memory?kind=gossip', 400],
        ['/memory?min_weight=2', 400],
        ['/memory?unknown=1', 400],
      ] as const) {
        const bad = await h.request('GET', path);
        expect([path, bad.status, bad.body?.error]).toEqual([path, status, 'validation_error']);
      }
      expect((await h.request('GET', '/memory', { token: null })).status).toBe(401);
      expect((await h.request('GET', '/memory', { token: TOKENS.reader })).status).toBe(403);
      expect((await h.request('DELETE', `/memory/${entryId}`, { token: TOKENS.writer })).status).toBe(403);

      const del = await h.request('DELETE', `/memory/${entryId}`);
      expect(del).toMatchObject({ status: 200, body: { id: entryId, deleted: true } });
      expect((await h.request('DELETE', `/memory/${entryId}`)).status).toBe(404);
      expect((await h.request('DELETE', '/memory/no_such_entry')).body.error).toBe('not_found');
      expect(
        (await h.request('GET', '/memory?query=launch%20code%20word&kind=tool_result')).body.entries,
      ).toEqual([]);
      const log = await h.request('GET', '/admin/events?task_id=system:memory');
      expect(
        log.body.events.map((e: Ev) => [e.type, e.payload.op, e.payload.entry_id, e.payload.metadata.actor]),
      ).toEqual([['MEMORY_WRITTEN', 'delete', entryId, 'admin']]);
      expect(log.body.events[0].payload).not.toHaveProperty('text');
    } finally {
      await dispose();
    }
  });

  it('a critic that throws, times out, answers non-JSON or out of range leaves the task running and memory untouched', async () => {
    const read = (path: string) => ({ kind: 'tool', tool: 'file_read', args: { path } });
    const { h, dispose } = await withScript(
      {
        orchestrator: [
          JSON.stringify({ type: 'plan', steps: FILES.map((f, i) => ({ id: `s${i}`, ...read(f) })) }),
          JSON.stringify({ type: 'respond', content: 'done' }),
        ],
        critic: [
          { error: 'provider_error', message: 'critic backend down' },
          'it looks fine to me',
          score(7),
          { content: score(0.5), delay_ms: 5_000 },
        ],
      },
      { RUNLEDGER_CRITIC_TIMEOUT_MS: '300' },
    );
    try {
      for (const f of FILES) writeFileSync(join(h.workspace, f), `the ${f} fact`);
      const { task, events } = await runTask(h, 'store four facts', 'session-c');
      expect(task.status).toBe('completed');
      const results = ofType(events, 'CRITIC_RESULT').map((e) => e.payload);
      expect(results).toHaveLength(4);
      expect(results.every((r) => r.score === null && r.critic === 'model')).toBe(true);
      expect(results.map((r) => r.error).sort()).toEqual([
        expect.stringMatching(/critic failed: .*critic backend down/),
        expect.stringMatching(/critic failed: critic timed out after 300 ms/),
        expect.stringMatching(/not JSON: "it looks fine to me"/),
        expect.stringMatching(/not a CriticScore: weight/),
      ]);
      expect(outcomeWrites(events)).toEqual([]);
      expect((await h.request('GET', '/memory?kind=tool_result')).body.entries).toEqual([]);
      // the task itself completed and left its plan and summary, whatever the critic did
      expect(ofType(events, 'MEMORY_WRITTEN').map((e) => e.payload.kind)).toEqual(['plan', 'summary']);
    } finally {
      await dispose();
    }
  });

  it('the memory tools share the store: a later task searches what an earlier one inserted, and a repeat insert reinforces', async () => {
    const fact = "the user's favourite editor is helix";
    const { h, dispose } = await withScript({
      orchestrator: [
        JSON.stringify({ type: 'tool', tool: 'memory_search', args: { query: 'favourite editor' } }),
        JSON.stringify({
          type: 'tool',
          tool: 'memory_insert',
          args: { text: fact, kind: 'user_preference', weight: 0.5 },
        }),
        JSON.stringify({ type: 'respond', content: 'ok' }),
      ],
    });
    try {
      const first = await runTask(h, 'note my editor', 'session-d');
      expect(first.task.status).toBe('completed');
      const [search1, insert1] = ofType(first.events, 'TOOL_COMPLETED');
      expect(search1.payload.result.output.hits).toEqual([]);
      // no critic model in the script: the heuristic critic scores, and memory tool outcomes are not re-stored
      expect(ofType(first.events, 'CRITIC_RESULT').map((e) => e.payload.critic)).toEqual([
        'heuristic',
        'heuristic',
      ]);
      expect(outcomeWrites(first.events)).toEqual([]);
      const id = insert1.payload.result.output.id as string;

      const second = await runTask(h, 'what editor do I like?', 'session-e');
      const [search2, insert2] = ofType(second.events, 'TOOL_COMPLETED');
      expect(search2.payload.result.output.hits[0]).toMatchObject({
        id,
        text: fact,
        kind: 'user_preference',
        weight: 0.5,
      });
      expect(insert2.payload.result.output.id).toBe(id);
      expect(
        ofType(second.events, 'CONTEXT_BUILT')[0].payload.memory_hits.map((m: { id: string }) => m.id),
      ).toContain(id);

      const log = (await h.request('GET', '/admin/events?task_id=system:memory')).body.events as Ev[];
      expect(log.map((e) => [e.payload.op, e.payload.entry_id, e.payload.metadata.task_id])).toEqual([
        ['insert', id, first.task_id],
        ['reinforce', id, second.task_id],
      ]);
      expect((await h.request('GET', '/memory?kind=user_preference')).body.entries).toEqual([
        expect.objectContaining({ id, weight: 0.6, session_id: 'session-d', task_id: first.task_id }),
      ]);
      // tasks that only used memory tools leave no summary: the entry is the only copy of the fact,
      // so deleting it forgets the fact
      expect((await h.request('GET', '/memory')).body.entries.map((e: { id: string }) => e.id)).toEqual([id]);
      expect((await h.request('DELETE', `/memory/${id}`)).status).toBe(200);
      const after = (await h.request('GET', '/memory?query=favourite%20editor%20helix')).body.entries;
      expect(after.filter((e: { text: string }) => e.text.includes('helix'))).toEqual([]);
    } finally {
      await dispose();
    }
  });
  it('memory_search sees every session unless scope "session" asks for only the calling task\'s', async () => {
    const fact = 'the build server is called hopper';
    const search = (scope: string) =>
      JSON.stringify({ type: 'tool', tool: 'memory_search', args: { query: 'build server name', scope } });
    const { h, dispose } = await withScript({
      orchestrator: [
        JSON.stringify({ type: 'tool', tool: 'memory_insert', args: { text: fact, kind: 'fact' } }),
        search('session'),
        search('all'),
        JSON.stringify({ type: 'respond', content: 'ok' }),
      ],
    });
    try {
      const hitsOf = (events: Ev[]) =>
        ofType(events, 'TOOL_COMPLETED')
          .slice(1)
          .map((e) => e.payload.result.output.hits.map((hit: { text: string }) => hit.text));
      const first = await runTask(h, 'remember the build server', 'session-g');
      expect(hitsOf(first.events)).toEqual([[fact], [fact]]);
      // the same fact from another session reinforces the first session's entry: it stays that session's
      const second = await runTask(h, 'remember the build server', 'session-h');
      expect(hitsOf(second.events)).toEqual([[], [fact]]);
      const ofSessionH = await h.request('GET', '/memory?session_id=session-h&kind=fact');
      expect(ofSessionH.body.entries).toEqual([]);
    } finally {
      await dispose();
    }
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(mismatches).toEqual([]);
  });
});
