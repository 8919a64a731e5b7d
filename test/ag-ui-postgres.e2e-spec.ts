import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Interrupt, RunAgentInput } from '@ag-ui/core';
import { EventSchema } from '@ag-ui/core/schemas';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { ApiHarness, bootApi } from './api-harness';
import { post } from './ag-ui-client';

jest.setTimeout(90_000);

const input = (threadId: string, runId: string, text: string): RunAgentInput => ({
  threadId,
  runId,
  messages: [{ id: `${runId}-u`, role: 'user', content: text }],
  tools: [],
  context: [],
  state: {},
});

describePostgres('POST /ag-ui on PostgreSQL: two instances over one database', () => {
  const pg = useTestPostgres('rl_agui');

  it('a run started on one instance is resumed after any event on the other, and its interrupt answered there continues the task', async () => {
    const schema = await pg.freshSchema({ migrate: false });
    await schema.handle.close();
    const dir = mkdtempSync(join(tmpdir(), 'rl-agui-pg-'));
    const script = join(dir, 'script.json');
    // every task of either instance: a command that needs permission, then the answer
    writeFileSync(
      script,
      JSON.stringify({
        orchestrator: [
          JSON.stringify({ type: 'tool', tool: 'shell_exec', args: { command: 'echo pg > pg.txt' } }),
          JSON.stringify({ type: 'respond', content: 'wrote pg.txt' }),
        ],
      }),
    );
    const env = {
      RUNLEDGER_DB: schema.url,
      RUNLEDGER_PG_SCHEMA: schema.schema,
      RUNLEDGER_DATA_DIR: dir,
      RUNLEDGER_MEMORY: 'off',
      RUNLEDGER_MODEL: `scripted:${script}`,
    };
    const servers: ApiHarness[] = [];
    try {
      servers.push(await bootApi(env, { checkResponses: true }));
      servers.push(await bootApi(env, { checkResponses: true }));
      const [a, b] = servers;
      const body = input('thread-pg', 'run-pg-1', 'write the file');
      const first = await post(a, body);
      expect(first.status).toBe(200);
      for (const e of first.events) expect(EventSchema.safeParse(e.event).error).toBeUndefined();
      const finished = first.events.at(-1)!.event as unknown as {
        type: string;
        outcome: { type: string; interrupts: Interrupt[] };
      };
      expect(finished).toMatchObject({ type: 'RUN_FINISHED', outcome: { type: 'interrupt' } });

      // the other instance serves the same run after any event: the rest, no gap, no duplicate, no second task
      for (let cut = 0; cut < first.events.length - 1; cut++) {
        const rest = await post(b, body, { 'Last-Event-ID': first.events[cut].id });
        expect(rest.events).toEqual(first.events.slice(cut + 1));
      }
      expect((await b.request('GET', '/tasks?session_id=thread-pg')).body.tasks).toHaveLength(1);

      // the interrupt is answered on the other instance: the same task runs on to its end
      const [interrupt] = finished.outcome.interrupts;
      const resumeBody: RunAgentInput = {
        ...input('thread-pg', 'run-pg-2', 'write the file'),
        resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { decision: 'allow_once' } }],
      };
      const second = await post(b, resumeBody);
      expect(second.status).toBe(200);
      expect(second.events.at(-1)!.event).toMatchObject({
        type: 'RUN_FINISHED',
        outcome: { type: 'success' },
        result: 'wrote pg.txt',
      });
      const tasks = (await a.request('GET', '/tasks?session_id=thread-pg')).body.tasks as {
        task_id: string;
        status: string;
      }[];
      expect(tasks).toEqual([expect.objectContaining({ status: 'completed' })]);
      // and the first instance streams that resumed run the same, after any of its events too
      const again = await post(a, resumeBody);
      expect(again.events).toEqual(second.events);
      const cut = Math.floor(second.events.length / 2);
      expect((await post(a, resumeBody, { 'Last-Event-ID': second.events[cut].id })).events).toEqual(
        second.events.slice(cut + 1),
      );
      expect([...a.responseMismatches, ...b.responseMismatches]).toEqual([]);
    } finally {
      for (const s of servers.reverse()) await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
