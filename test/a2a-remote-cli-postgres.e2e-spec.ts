import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { PgEventStore } from '@runledger/event-store';
import { describePostgres, runCli, stderrProblems, useTestPostgres } from '@runledger/testing';
import { ApiHarness, TOKENS, bootApi, waitForTask } from './api-harness';

jest.setTimeout(90_000);

const REMOTE_INPUT = 'run echo from-the-cli > remote-cli.txt';
/** the delegation's own time limit: the test waits longer than this for the person's answer */
const REMOTE_TIMEOUT_MS = 5_000;

describePostgres('A2A: a remote agent as a delegate, from the CLI, on PostgreSQL', () => {
  const pg = useTestPostgres('rl_a2a_cli');
  let remote: ApiHarness;
  let dir: string;

  beforeAll(async () => {
    remote = await bootApi();
  });
  afterAll(async () => {
    await remote?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("shows the remote agent's question, exits 3 naming `runledger resolve`; resolved later (past the delegation's time limit, which a person's wait does not use), the answer is forwarded and both tasks complete", async () => {
    const schema = await pg.freshSchema();
    dir = mkdtempSync(join(tmpdir(), 'rl-a2a-cli-'));
    const script = join(dir, 'script.json');
    writeFileSync(
      script,
      JSON.stringify({
        orchestrator: [
          JSON.stringify({ type: 'delegate', agent: 'far', input: REMOTE_INPUT }),
          JSON.stringify({ type: 'respond', content: 'far wrote remote-cli.txt' }),
        ],
      }),
    );
    mkdirSync(join(dir, 'data'));
    const env = {
      RUNLEDGER_MODEL: `scripted:${script}`,
      RUNLEDGER_DB: schema.url,
      RUNLEDGER_PG_SCHEMA: schema.schema,
      RUNLEDGER_DATA_DIR: join(dir, 'data'),
      RUNLEDGER_MEMORY: 'off',
      RUNLEDGER_SANDBOX: 'process',
      RL_FAR_HEADERS: JSON.stringify({ authorization: `Bearer ${TOKENS.admin}` }),
      RUNLEDGER_AGENTS: JSON.stringify([
        {
          name: 'far',
          a2a: { url: remote.url, headers_from: 'env:RL_FAR_HEADERS' },
          timeout_ms: REMOTE_TIMEOUT_MS,
        },
      ]),
    };
    const store = new PgEventStore(schema.handle);
    try {
      const first = await runCli(['run', 'have far write it'], {
        cwd: dir,
        env,
      });
      expect(stderrProblems(first.stderr)).toEqual([]);
      expect(first.code).toBe(3);
      expect(first.stderr).toContain(`⇢ remote agent far (${remote.url}) sent: ${REMOTE_INPUT}`);
      expect(first.stderr).toMatch(/remote task \S+ input-required/);
      expect(first.stderr).toMatch(
        /\? permission needed: a2a:far\/shell_exec \{"remote_task_id":"task_\w+".* \(remote agent far asks: writes remote-cli\.txt\)\n {2}on remote agent far: allow always: shell_exec/,
      );
      const how = /runledger resolve (task_\S+) (\S+) allow_once\|allow_always\|deny/.exec(first.stderr);
      expect(how).not.toBeNull();
      const [, taskId, requestId] = how!;

      // the remote task waits for the same decision
      const remoteTasks = (await remote.request('GET', '/tasks?limit=10')).body.tasks as {
        task_id: string;
        status: string;
      }[];
      expect(remoteTasks).toHaveLength(1);
      expect(remoteTasks[0].status).toBe('awaiting_permission');

      // the person answers after the delegation's time limit has gone by on the wall clock
      const started = (await store.readWholeStream(taskId)).find((e) => e.type === 'CHILD_TASK_STARTED')!;
      const due = Date.parse(started.created_at) + REMOTE_TIMEOUT_MS + 500;
      await new Promise((r) => setTimeout(r, Math.max(0, due - Date.now())));

      const second = await runCli(['resolve', taskId, requestId, 'allow_once'], {
        cwd: dir,
        env,
      });
      expect(stderrProblems(second.stderr)).toEqual([]);
      expect(second.code).toBe(0);
      expect(second.stdout.trim()).toBe('far wrote remote-cli.txt');

      const remoteTask = await waitForTask(remote, remoteTasks[0].task_id);
      expect(remoteTask.status).toBe('completed');
      expect((await remote.request('GET', '/tasks?limit=10')).body.tasks).toHaveLength(1);
      expect(readFileSync(join(remote.workspace, 'remote-cli.txt'), 'utf8').trim()).toBe('from-the-cli');
      expect(existsSync(join(dir, 'remote-cli.txt'))).toBe(false);

      const log: RuntimeEvent[] = await store.readWholeStream(taskId);
      const types = log.map((e) => e.type);
      expect(types.filter((t) => t === 'CHILD_TASK_STARTED')).toHaveLength(1);
      expect(log.find((e) => e.type === 'PERMISSION_RESOLVED')!.payload).toMatchObject({
        request_id: requestId,
        decision: 'allow_once',
      });
      expect(log.find((e) => e.type === 'CHILD_TASK_ENDED')!.payload).toMatchObject({
        status: 'completed',
        stop_reason: 'completed',
      });
      expect(
        log
          .filter((e) => e.type === 'REMOTE_TASK_UPDATED')
          .map((e) => (e.payload as { state: string }).state),
      ).toEqual(expect.arrayContaining(['input-required', 'completed']));
      expect(log[log.length - 1]).toMatchObject({
        type: 'TASK_COMPLETED',
        payload: { stop_reason: 'completed' },
      });
    } finally {
      await schema.dispose();
    }
  });
});
