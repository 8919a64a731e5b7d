import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { describePostgres, useTestPostgres } from '@runledger/testing';
import { ApiHarness, TOKENS, bootApi, waitForTask } from './api-harness';
import { asTask, clientOf, isFinalTask, message, send, startReceiver, text } from './a2a-client';

jest.setTimeout(60_000);

describePostgres('A2A push on PostgreSQL: two instances, one delivery per update', () => {
  const pg = useTestPostgres('rl_a2a');

  it('both instances hear the callback; each update is claimed and sent by one of them, once', async () => {
    const schema = await pg.freshSchema({ migrate: false });
    await schema.handle.close();
    const dataDir = mkdtempSync(join(tmpdir(), 'rl-a2a-pg-'));
    const env = {
      RUNLEDGER_DB: schema.url,
      RUNLEDGER_PG_SCHEMA: schema.schema,
      RUNLEDGER_DATA_DIR: dataDir,
      RUNLEDGER_MEMORY: 'off',
      RUNLEDGER_OUTBOUND_SIGNING_KEY: 'pg-signing-key-0123456789abcdef',
    };
    // slow answers: both instances are live while each update is in flight
    const receiver = await startReceiver(() => 200, 150);
    const servers: ApiHarness[] = [];
    try {
      servers.push(await bootApi(env, { checkResponses: true }));
      servers.push(await bootApi(env, { checkResponses: true }));
      const [a, b] = servers;
      const client = await clientOf(a.url, TOKENS.admin);
      const task = asTask(
        await client.sendMessage(
          send(message([text('run echo two-instances')]), {
            returnImmediately: true,
            taskPushNotificationConfig: {
              tenant: '',
              id: 'pg-cfg',
              taskId: '',
              url: receiver.url,
              token: '',
              authentication: undefined,
            },
          }),
        ),
      );
      await waitForTask(a, task.id);
      const deadline = Date.now() + 20_000;
      while (!receiver.taken.some((r) => isFinalTask(r.body)) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 50));
      expect(receiver.taken.some((r) => isFinalTask(r.body))).toBe(true);
      const log = async () =>
        (await b.request('GET', `/admin/events?task_id=outbound:${task.id}&limit=1000`)).body
          .events as RuntimeEvent[];
      let outbound = await log();
      while (
        outbound.filter((e) => e.type === 'DELIVERY_SUCCEEDED').length < receiver.taken.length &&
        Date.now() < deadline
      ) {
        await new Promise((r) => setTimeout(r, 50));
        outbound = await log();
      }
      const seqs = receiver.taken.map((r) => {
        const body = JSON.parse(r.body) as Record<
          string,
          { metadata: { runledger: { seq?: number; last_seq?: number } } }
        >;
        const update = body.statusUpdate ?? body.task;
        return update.metadata.runledger.seq ?? update.metadata.runledger.last_seq!;
      });
      expect(seqs).toEqual([...new Set(seqs)].sort((x, y) => x - y));
      const started = outbound.filter((e) => e.type === 'DELIVERY_STARTED');
      expect(started).toHaveLength(receiver.taken.length);
      expect(outbound.filter((e) => e.type === 'DELIVERY_SUCCEEDED')).toHaveLength(receiver.taken.length);
      expect([...a.responseMismatches, ...b.responseMismatches]).toEqual([]);
    } finally {
      for (const s of servers.reverse()) await s.close();
      await receiver.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
