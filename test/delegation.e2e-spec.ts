import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeOpenAiServer, FakeReply, runCli, startFakeOpenAiServer } from '@runledger/testing';
import { ApiHarness, TOKENS, WsClient, bootApi, waitForTask } from './api-harness';
import { ServerProcess } from './permissions-server';

/**
 * Delegation end to end, with a local OpenAI-compatible server standing in for
 * the models (native tool calling): it answers each request by the task it is
 * for (its `## Task` section), since the children of one plan ask at the same time.
 */

jest.setTimeout(90_000);

type Wire = { role: string; content?: string | null };
type Body = Record<string, unknown>;

const messagesOf = (body: Body): Wire[] => (body.messages as Wire[]) ?? [];
/** the task a request works for: the text after `## Task` in its user message */
const taskOf = (body: Body): string => {
  const user = messagesOf(body).find((m) => m.role === 'user')?.content ?? '';
  return /## Task\n([\s\S]*)$/.exec(user)?.[1].trim() ?? '';
};
/** how many tool results the request carries (the rounds already done, natively) */
const toolResults = (body: Body): Wire[] => messagesOf(body).filter((m) => m.role === 'tool');
const delegate = (id: string, input: string) => ({
  id,
  name: 'runledger_delegate',
  arguments: JSON.stringify({ agent: 'coder', input }),
});

const PARENT = 'build the report from two parts';
const CHILD_ONE = 'part one: say hello';
const CHILD_TWO = 'part two: append to out.txt';

/**
 * The parent delegates both parts in one reply, then answers with what came back; part one
 * answers after a pause; part two writes to out.txt (which asks for permission), then answers.
 */
function treeRoute(options: { slowSecondAnswer?: () => boolean } = {}) {
  return (body: Body): FakeReply | undefined => {
    const task = taskOf(body);
    const results = toolResults(body);
    if (task === PARENT) {
      if (results.length === 0)
        return { tool_calls: [delegate('call_one', CHILD_ONE), delegate('call_two', CHILD_TWO)] };
      return { content: `report: ${results.map((r) => r.content).join(' | ')}` };
    }
    if (task === CHILD_ONE) return { content: 'hello from part one', delay_ms: 700 };
    if (task === CHILD_TWO) {
      if (results.length === 0)
        return {
          tool_calls: [
            { id: 'w1', name: 'shell_exec', arguments: JSON.stringify({ command: 'echo two >> out.txt' }) },
          ],
        };
      return { content: 'part two appended', delay_ms: options.slowSecondAnswer?.() ? 4000 : 0 };
    }
    return undefined;
  };
}

const modelEnv = (server: FakeOpenAiServer): Record<string, string> => ({
  RUNLEDGER_MODEL: 'openai',
  OPENAI_BASE_URL: server.baseURL,
  OPENAI_API_KEY: 'test-key',
  RUNLEDGER_MODEL_ORCHESTRATOR: 'tree-model',
  RUNLEDGER_CRITIC: 'off',
});

interface LoggedEvent {
  task_id: string;
  sequence: number;
  position: number;
  type: string;
  payload: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

describe('delegation through HTTP and WebSocket (in process)', () => {
  let server: FakeOpenAiServer;
  let api: ApiHarness;
  beforeAll(async () => {
    server = await startFakeOpenAiServer({ apiKey: 'test-key' });
    api = await bootApi(modelEnv(server), { checkResponses: true });
  });
  afterAll(async () => {
    await api?.close();
    await server?.close();
  });

  const events = async (taskId: string): Promise<LoggedEvent[]> =>
    (await api.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events;

  it('two children of one plan run concurrently; one asks for permission, answered from the parent; the parent completes with both results in its context', async () => {
    server.setRoute(treeRoute());
    const submitted = await api.request('POST', '/tasks', { token: TOKENS.writer, body: { input: PARENT } });
    expect(submitted.status).toBe(202);
    const parentId: string = submitted.body.task_id;

    // the child's permission request shows on the parent (the root), naming the child's task
    let parent = await waitForTask(api, parentId, () => true);
    for (let i = 0; i < 400 && parent.pending.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 25));
      parent = (await api.request('GET', `/tasks/${parentId}`)).body;
    }
    expect(parent).toMatchObject({
      status: 'running',
      parent_task_id: null,
      root_task_id: parentId,
      depth: 0,
    });
    const [request] = parent.pending;
    expect(request).toMatchObject({
      kind: 'permission',
      tool: 'shell_exec',
      args: { command: 'echo two >> out.txt' },
    });
    expect(request.task_id).not.toBe(parentId);
    const child = (await api.request('GET', `/tasks/${request.task_id}`)).body;
    expect(child).toMatchObject({
      status: 'awaiting_permission',
      parent_task_id: parentId,
      root_task_id: parentId,
      depth: 1,
      agent: 'coder',
    });

    const answered = await api.request(
      'POST',
      `/tasks/${request.task_id}/permissions/${request.request_id}`,
      {
        token: TOKENS.approver,
        body: { decision: 'allow_once' },
      },
    );
    expect(answered.status).toBe(202);
    const done = await waitForTask(api, parentId);
    expect(done).toMatchObject({ status: 'completed', pending: [] });
    expect(done.result).toBe(
      'report: step call_one completed: hello from part one | step call_two completed: part two appended',
    );
    expect(readFileSync(join(api.workspace, 'out.txt'), 'utf8')).toBe('two\n');

    // what the model received for the parent's last round: both children's results as the delegations' answers
    const parentRequests = server.requests.filter((r) => taskOf(r.body) === PARENT);
    const last = parentRequests[parentRequests.length - 1].body;
    expect(toolResults(last).map((m) => m.content)).toEqual([
      expect.stringContaining('hello from part one'),
      expect.stringContaining('part two appended'),
    ]);
    // the orchestrator was offered the agents as a function
    const offered = (
      parentRequests[0].body.tools as { function: { name: string; description: string } }[]
    ).find((t) => t.function.name === 'runledger_delegate');
    expect(offered?.function.description).toContain('- coder: ');
    // a child is told it works as the agent
    const childRequest = server.requests.find((r) => taskOf(r.body) === CHILD_ONE)!;
    expect(messagesOf(childRequest.body)[0].content).toContain('You work as the coder agent');

    // the tree: children in the order they started, both completed
    const children = await api.request('GET', `/tasks/${parentId}/children`, { token: TOKENS.reader });
    expect(children.status).toBe(200);
    expect(
      children.body.children.map((c: { agent: string; step_id: string; status: string }) => [
        c.agent,
        c.step_id,
        c.status,
      ]),
    ).toEqual([
      ['coder', 'call_one', 'completed'],
      ['coder', 'call_two', 'completed'],
    ]);
    const [one, two] = children.body.children.map((c: { task_id: string }) => c.task_id);
    expect(two).toBe(request.task_id);

    // concurrent: both children asked their model before either ended
    const oneLog = await events(one);
    const twoLog = await events(two);
    const firstCall = (log: LoggedEvent[]) => log.find((e) => e.type === 'MODEL_CALLED')!.position;
    const end = (log: LoggedEvent[]) => log[log.length - 1].position;
    expect(Math.max(firstCall(oneLog), firstCall(twoLog))).toBeLessThan(Math.min(end(oneLog), end(twoLog)));

    // the parent's log: intent and end of each child, usage rolled up
    const parentLog = await events(parentId);
    expect(
      parentLog.filter((e) => e.type === 'CHILD_TASK_STARTED').map((e) => e.payload.child_task_id),
    ).toEqual([one, two]);
    expect(parentLog.filter((e) => e.type === 'CHILD_TASK_ENDED').map((e) => e.payload.status)).toEqual([
      'completed',
      'completed',
    ]);
    const childCalls = [oneLog, twoLog].map((l) => l.filter((e) => e.type === 'MODEL_CALLED').length);
    const ownCalls = parentLog.filter((e) => e.type === 'MODEL_CALLED').length;
    expect(done.usage.model_calls).toBe(ownCalls + childCalls[0] + childCalls[1]);
    expect(done.usage.tool_calls).toBe(1);

    // the WebSocket streams the whole tree, in order within each task
    const ws = await WsClient.authed(api.wsUrl, TOKENS.reader);
    try {
      ws.send({ type: 'subscribe', task_id: parentId, include_children: true, subscription_id: 'tree' });
      await ws.waitFor((m) => m.type === 'subscribed' && m.include_children === true);
      const total = parentLog.length + oneLog.length + twoLog.length;
      for (let i = 0; i < 400 && ws.events('tree').length < total; i++)
        await new Promise((r) => setTimeout(r, 25));
      const streamed: LoggedEvent[] = ws.events('tree');
      expect(streamed).toHaveLength(total);
      for (const [taskId, log] of [
        [parentId, parentLog],
        [one, oneLog],
        [two, twoLog],
      ] as const)
        expect(streamed.filter((e) => e.task_id === taskId).map((e) => e.sequence)).toEqual(
          log.map((e) => e.sequence),
        );
    } finally {
      ws.close();
    }
  });

  it('cancelling a parent ends its children with cancelled', async () => {
    server.setRoute((body) => {
      const task = taskOf(body);
      if (task === 'wait for the slow part') return { tool_calls: [delegate('call_slow', 'the slow part')] };
      if (task === 'the slow part') return { content: 'too late', delay_ms: 30_000 };
      return undefined;
    });
    const submitted = await api.request('POST', '/tasks', {
      token: TOKENS.writer,
      body: { input: 'wait for the slow part' },
    });
    const parentId: string = submitted.body.task_id;
    let children: { task_id: string }[] = [];
    for (let i = 0; i < 400 && children.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 25));
      children = (await api.request('GET', `/tasks/${parentId}/children`)).body.children;
    }
    expect(children).toHaveLength(1);
    const cancelled = await api.request('POST', `/tasks/${parentId}/cancel`, { token: TOKENS.writer });
    expect(cancelled.status).toBe(202);
    expect(cancelled.body).toMatchObject({ status: 'cancelled' });
    const child = await waitForTask(api, children[0].task_id);
    expect(child).toMatchObject({ status: 'cancelled', stop_reason: 'cancelled' });
  });

  it('a bad include_children is refused with a clear error', async () => {
    const ws = await WsClient.authed(api.wsUrl, TOKENS.reader);
    try {
      ws.send({ type: 'subscribe', task_id: 'task_x', include_children: 'yes' });
      const err = await ws.waitFor((m) => m.type === 'error');
      expect(err).toMatchObject({ error: 'validation_error' });
      expect(err.message).toContain('include_children');
    } finally {
      ws.close();
    }
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(api.responseMismatches).toEqual([]);
  });
});

describe('delegation across a crash (real server process, SIGKILL)', () => {
  const LEASE_TTL_MS = 3_000;
  let model: FakeOpenAiServer;
  let server: ServerProcess;
  beforeAll(async () => {
    model = await startFakeOpenAiServer({ apiKey: 'test-key' });
  });
  afterAll(async () => {
    await server?.dispose();
    await model?.close();
  });

  it('killed while a child runs, restarted: the whole tree finishes and no side effect runs twice', async () => {
    let slowOnce = true;
    model.setRoute(
      treeRoute({
        slowSecondAnswer: () => {
          const slow = slowOnce;
          slowOnce = false;
          return slow;
        },
      }),
    );
    server = ServerProcess.create({
      ...modelEnv(model),
      // the killed process's leases lapse in seconds (20 s by default): the restarted server takes its tasks over then
      RUNLEDGER_LEASE_RENEW_MS: '500',
      RUNLEDGER_LEASE_TTL_MS: String(LEASE_TTL_MS),
    });
    await server.start();
    const submitted = await server.request('POST', '/tasks', { input: PARENT });
    const parentId: string = submitted.body.task_id;
    let pending: { task_id: string; request_id: string }[] = [];
    for (let i = 0; i < 600 && pending.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 25));
      pending = (await server.request('GET', `/tasks/${parentId}`)).body.pending;
    }
    const [request] = pending;
    expect(
      (
        await server.request('POST', `/tasks/${request.task_id}/permissions/${request.request_id}`, {
          decision: 'allow_once',
        })
      ).status,
    ).toBe(202);
    // the command ran; the child is asking its model again (slowly) when the server dies
    for (let i = 0; i < 600; i++) {
      const log = await server.events(request.task_id);
      if (log.filter((e) => e.type === 'MODEL_CALLED').length === 2) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const before = await server.events(request.task_id);
    expect(before.filter((e) => e.type === 'TOOL_COMPLETED')).toHaveLength(1);
    expect(before.some((e) => e.type === 'TASK_COMPLETED')).toBe(false);
    await server.kill();
    // both leases lapse before the restart, so the restarted server claims parent and child in one pass and
    // marks each resumed; a sweep between the two lapses resumes the parent alone, which then starts its
    // child itself, unmarked
    await new Promise((r) => setTimeout(r, LEASE_TTL_MS + 500));

    await server.start();
    const done = await server.waitFor(parentId, undefined, 30_000);
    expect(done).toMatchObject({
      status: 'completed',
      result:
        'report: step call_one completed: hello from part one | step call_two completed: part two appended',
    });
    expect(readFileSync(join(server.workspace, 'out.txt'), 'utf8')).toBe('two\n');
    const childLog = await server.events(request.task_id);
    expect(childLog.filter((e) => e.type === 'TOOL_CALLED')).toHaveLength(1);
    expect(
      childLog.filter((e) => e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'resumed'),
    ).toHaveLength(1);
    const parentLog = await server.events(parentId);
    expect(parentLog.filter((e) => e.type === 'CHILD_TASK_STARTED')).toHaveLength(2);
    expect(parentLog.filter((e) => e.type === 'CHILD_TASK_ENDED')).toHaveLength(2);
    const children = (await server.request('GET', `/tasks/${parentId}/children`)).body.children;
    expect(children.map((c: { status: string }) => c.status)).toEqual(['completed', 'completed']);
  });
});

describe('delegation from the CLI (real child processes)', () => {
  let model: FakeOpenAiServer;
  let dir: string;
  beforeEach(async () => {
    model = await startFakeOpenAiServer({ apiKey: 'test-key' });
    model.setRoute(treeRoute());
    dir = mkdtempSync(join(tmpdir(), 'rl-deleg-cli-'));
  });
  afterEach(async () => {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const env = () => ({ ...modelEnv(model), RUNLEDGER_DB: join(dir, 'data', 'runledger.db') });

  it("run --yes answers a child's permission request too and prints the parent's answer", async () => {
    const res = await runCli(['run', PARENT, '--yes'], { cwd: dir, env: env() });
    expect(res.code).toBe(0);
    expect(res.stdout.trim()).toBe(
      'report: step call_one completed: hello from part one | step call_two completed: part two appended',
    );
    expect(readFileSync(join(dir, 'out.txt'), 'utf8')).toBe('two\n');
  });

  it('without a terminal, run stops waiting and names the child task to resolve', async () => {
    const res = await runCli(['run', PARENT], { cwd: dir, env: env() });
    expect(res.code).toBe(3);
    const how = /runledger resolve (task_\w+) (\S+) allow_once\|allow_always\|deny/.exec(res.stderr);
    expect(how).not.toBeNull();
    const resolved = await runCli(['resolve', how![1], how![2], 'allow_once'], { cwd: dir, env: env() });
    expect(resolved.code).toBe(0);
  });
});
