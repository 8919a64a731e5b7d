import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ApiHarness, TOKENS, bootApi, eventCount, waitForTask } from './api-harness';
import { ServerProcess } from './permissions-server';

jest.setTimeout(60_000);

const awaiting = (s: string) => s === 'awaiting_permission';

/** sys_util turns `run <cmd>` into shell_exec; the permission policy prompts before a command that writes. */
describe('permissions through HTTP', () => {
  let sut: ApiHarness;
  beforeAll(async () => {
    sut = await bootApi({}, { checkResponses: true });
  });
  afterAll(async () => {
    await sut.close();
  });

  const submit = async (input: string, session_id?: string): Promise<string> => {
    const res = await sut.request('POST', '/tasks', {
      token: TOKENS.writer,
      body: { input, ...(session_id ? { session_id } : {}) },
    });
    expect(res.status).toBe(202);
    return res.body.task_id;
  };
  const events = async (taskId: string) =>
    (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as {
      type: string;
      payload: Record<string, unknown>;
    }[];
  const decide = (taskId: string, requestId: string, decision: string, token: string = TOKENS.approver) =>
    sut.request('POST', `/tasks/${taskId}/permissions/${requestId}`, { token, body: { decision } });

  it('a call that needs permission waits durably, is approved (allow_once) and runs', async () => {
    const taskId = await submit('run echo approved > approved.txt');
    const waiting = await waitForTask(sut, taskId, awaiting);
    expect(waiting.pending).toEqual([
      expect.objectContaining({
        kind: 'permission',
        tool: 'shell_exec',
        args: { command: 'echo approved > approved.txt' },
      }),
    ]);
    expect(existsSync(join(sut.workspace, 'approved.txt'))).toBe(false);
    const asked = (await events(taskId)).find((e) => e.type === 'TASK_AWAITING_PERMISSION')!;
    expect(asked.payload).toMatchObject({
      request_id: waiting.pending[0].request_id,
      tool: 'shell_exec',
      args_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
      rule: 'write_inside_root',
    });

    const res = await decide(taskId, waiting.pending[0].request_id, 'allow_once');
    expect(res.status).toBe(202);
    const done = await waitForTask(sut, taskId);
    expect(done).toMatchObject({ status: 'completed', stop_reason: 'completed', pending: [] });
    expect(readFileSync(join(sut.workspace, 'approved.txt'), 'utf8')).toBe('approved\n');
    const log = await events(taskId);
    // allow_once covers this one call: nothing more is recorded as allowed
    expect(log.find((e) => e.type === 'PERMISSION_RESOLVED')?.payload).not.toHaveProperty('covers');
    const types = log.map((e) => e.type);
    expect(types.indexOf('PERMISSION_RESOLVED')).toBeGreaterThan(types.indexOf('TASK_AWAITING_PERMISSION'));
    expect(types.indexOf('TOOL_CALLED')).toBeGreaterThan(types.indexOf('PERMISSION_RESOLVED'));
  });

  it('a denied call never runs, fails with permission_denied, and the task ends', async () => {
    const taskId = await submit('run touch denied.txt');
    const waiting = await waitForTask(sut, taskId, awaiting);
    expect((await decide(taskId, waiting.pending[0].request_id, 'deny')).status).toBe(202);
    const done = await waitForTask(sut, taskId);
    expect(done.status).toBe('failed');
    expect(existsSync(join(sut.workspace, 'denied.txt'))).toBe(false);
    const log = await events(taskId);
    expect(log.find((e) => e.type === 'TOOL_FAILED')?.payload).toMatchObject({
      error_kind: 'permission_denied',
    });
    expect(log.some((e) => e.type === 'TOOL_CALLED')).toBe(false);
  });

  it('allow_always is remembered for the session: the second call runs without asking; another session is asked', async () => {
    const first = await submit('run touch always-1.txt', 'sess-always');
    const waiting = await waitForTask(sut, first, awaiting);
    // the person is told what "always" covers (tool, rule, scope) before answering, and the log keeps it
    const covers = waiting.pending[0].covers;
    expect(covers).toMatch(/^allow always: shell_exec, .+, for this session \(rule [a-z_]+\)$/);
    const asked = (await events(first)).find((e) => e.type === 'TASK_AWAITING_PERMISSION')!;
    expect(covers).toContain(`(rule ${asked.payload.rule})`);
    expect(asked.payload.covers).toBe(covers);
    expect((await decide(first, waiting.pending[0].request_id, 'allow_always')).status).toBe(202);
    expect(await waitForTask(sut, first)).toMatchObject({ status: 'completed' });
    const resolved = (await events(first)).find((e) => e.type === 'PERMISSION_RESOLVED')!;
    expect(resolved.payload).toMatchObject({ decision: 'allow_always', covers });

    const second = await submit('run touch always-2.txt', 'sess-always');
    expect(await waitForTask(sut, second)).toMatchObject({ status: 'completed' });
    expect(existsSync(join(sut.workspace, 'always-2.txt'))).toBe(true);
    expect((await events(second)).some((e) => e.type === 'TASK_AWAITING_PERMISSION')).toBe(false);

    const other = await submit('run touch always-3.txt', 'sess-other');
    await waitForTask(sut, other, awaiting);
    expect(existsSync(join(sut.workspace, 'always-3.txt'))).toBe(false);
    await sut.request('POST', `/tasks/${other}/cancel`, { token: TOKENS.writer });
  });

  it('a hard stop is never asked about: it fails at once and nothing runs', async () => {
    const taskId = await submit('run ls && rm -rf /');
    const done = await waitForTask(sut, taskId);
    expect(done.status).toBe('failed');
    const log = await events(taskId);
    expect(log.some((e) => e.type === 'TASK_AWAITING_PERMISSION' || e.type === 'TOOL_CALLED')).toBe(false);
  });

  it('a replayed, stale or unknown decision is refused with 409 and changes nothing', async () => {
    const taskId = await submit('run echo once > once.txt');
    const waiting = await waitForTask(sut, taskId, awaiting);
    const requestId = waiting.pending[0].request_id;

    const before = await eventCount(sut);
    const unknown = await decide(taskId, 'perm_doesnotexist', 'allow_once');
    expect(unknown.status).toBe(409);
    expect(unknown.body).toMatchObject({ error: 'illegal_state' });
    expect(await eventCount(sut)).toBe(before);

    expect((await decide(taskId, requestId, 'allow_once')).status).toBe(202);
    await waitForTask(sut, taskId);
    const settled = await eventCount(sut);
    for (const decision of ['allow_once', 'deny', 'allow_always']) {
      const replay = await decide(taskId, requestId, decision);
      expect(replay.status).toBe(409);
    }
    expect(await eventCount(sut)).toBe(settled);
    expect(readFileSync(join(sut.workspace, 'once.txt'), 'utf8')).toBe('once\n');
  });

  it('needs the approvals scope and a valid decision', async () => {
    const taskId = await submit('run echo scope > scope.txt');
    const waiting = await waitForTask(sut, taskId, awaiting);
    const requestId = waiting.pending[0].request_id;
    expect((await decide(taskId, requestId, 'allow_once', TOKENS.reader)).status).toBe(403);
    expect((await decide(taskId, requestId, 'allow_once', TOKENS.writer)).status).toBe(403);
    expect((await decide(taskId, requestId, 'yes please')).status).toBe(400);
    expect((await waitForTask(sut, taskId, awaiting)).pending[0].request_id).toBe(requestId);
    await sut.request('POST', `/tasks/${taskId}/cancel`, { token: TOKENS.writer });
  });
  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('a wait for permission survives a crash (SIGKILL of the server process)', () => {
  const suiteServer = ServerProcess.forSuite();
  let server: ServerProcess;
  beforeAll(() => {
    server = suiteServer();
  });

  it('kill while awaiting permission, restart, resolve: the task completes', async () => {
    const submitted = await server.request('POST', '/tasks', { input: 'run echo survived > restart.txt' });
    expect(submitted.status).toBe(202);
    const taskId = submitted.body.task_id;
    const waiting = await server.waitFor(taskId, awaiting);
    const requestId = waiting.pending[0].request_id;

    await server.kill();
    await server.start();

    const after = await server.waitFor(taskId, awaiting);
    expect(after.pending).toEqual([expect.objectContaining({ request_id: requestId, kind: 'permission' })]);
    expect(existsSync(join(server.workspace, 'restart.txt'))).toBe(false);
    expect(
      (await server.request('POST', `/tasks/${taskId}/permissions/${requestId}`, { decision: 'allow_once' }))
        .status,
    ).toBe(202);
    expect(await server.waitFor(taskId)).toMatchObject({ status: 'completed', stop_reason: 'completed' });
    expect(readFileSync(join(server.workspace, 'restart.txt'), 'utf8')).toBe('survived\n');
    const types = (await server.events(taskId)).map((e) => e.type);
    expect(types.filter((t) => t === 'TOOL_CALLED')).toHaveLength(1);
  });
});
