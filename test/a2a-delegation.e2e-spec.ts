import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeOpenAiServer, FakeReply, runCli, startFakeOpenAiServer } from '@runledger/testing';
import { ADMIN, ServerProcess } from './permissions-server';

/**
 * Runledger delegating to another Runledger over A2A: two real server processes. Between them a
 * forwarding proxy in this process (B's public URL, so its card sends A's client through it) counts
 * the messages A sends and can hold the reply to the first one while the test kills A.
 */

jest.setTimeout(120_000);

type Body = Record<string, unknown>;
type Wire = { role: string; content?: string | null };
const toolResults = (body: Body): Wire[] =>
  ((body.messages as Wire[]) ?? []).filter((m) => m.role === 'tool');

const REMOTE_INPUT = 'run echo remote-ok > remote.txt';

/** A's orchestrator: the task goes to remote agent b; its answer is what b answered. */
const delegatingModel = (body: Body): FakeReply | undefined => {
  const results = toolResults(body);
  if (results.length === 0)
    return {
      tool_calls: [
        {
          id: 'call_b',
          name: 'runledger_delegate',
          arguments: JSON.stringify({ agent: 'b', input: REMOTE_INPUT }),
        },
      ],
    };
  return { content: `remote answered: ${results.map((r) => r.content).join(' | ')}` };
};

interface Forwarded {
  method: string;
  /** a SendMessage that starts a task (no taskId) */
  starts: boolean;
}

/** Forwards every request to `target`; `onStart` runs after B answered a starting SendMessage, before A hears it. */
async function startProxy() {
  const seen: Forwarded[] = [];
  const state: { target: string; onStart: (() => Promise<void>) | null } = { target: '', onStart: null };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        let method = `${req.method} ${req.url}`;
        let starts = false;
        try {
          const rpc = JSON.parse(body.toString('utf8')) as { method?: string; params?: Body };
          if (rpc.method) {
            method = rpc.method;
            starts = rpc.method === 'SendMessage' && !(rpc.params?.message as Body | undefined)?.taskId;
          }
        } catch {
          // not JSON-RPC (the card): forwarded as it is
        }
        seen.push({ method, starts });
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers))
          if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers.set(k, v);
        const upstream = await fetch(`${state.target}${req.url}`, {
          method: req.method,
          headers,
          body: req.method === 'GET' ? undefined : body,
        });
        const hold = starts ? state.onStart : null;
        if (hold) {
          state.onStart = null;
          await upstream.arrayBuffer();
          await hold();
          res.destroy();
          return;
        }
        res.writeHead(upstream.status, Object.fromEntries(upstream.headers.entries()));
        if (!upstream.body) return res.end();
        for await (const chunk of upstream.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
        res.end();
      })().catch(() => res.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    state,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const poll = async <T>(read: () => Promise<T | null | undefined>, what: string, ms = 60_000): Promise<T> => {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe('remote agents as delegates (two Runledger servers over A2A)', () => {
  let model: FakeOpenAiServer;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let a: ServerProcess;
  let b: ServerProcess;
  let firstParent = '';

  beforeAll(async () => {
    model = await startFakeOpenAiServer({ apiKey: 'test-key' });
    model.setRoute(delegatingModel);
    proxy = await startProxy();
    b = ServerProcess.create({ RUNLEDGER_PUBLIC_URL: proxy.url });
    await b.start();
    proxy.state.target = b.url;
    a = ServerProcess.create({
      RUNLEDGER_MODEL: 'openai',
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: 'test-key',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'delegating-model',
      RUNLEDGER_CRITIC: 'off',
      RUNLEDGER_LEASE_TTL_MS: '3000',
      RUNLEDGER_LEASE_RENEW_MS: '1000',
      RUNLEDGER_AGENTS: JSON.stringify([
        { name: 'b', a2a: { url: proxy.url, headers_from: 'env:B_HEADERS' } },
      ]),
      B_HEADERS: JSON.stringify({ authorization: `Bearer ${ADMIN}` }),
    });
    await a.start();
  });
  afterAll(async () => {
    await a?.dispose();
    await b?.dispose();
    await proxy?.close();
    await model?.close();
  });

  it('A killed right after B took the message, restarted: B has one task for it, its question is answered through A, A completes with its answer', async () => {
    proxy.state.onStart = () => a.kill();
    const submitted = await a.request('POST', '/tasks', { input: 'ask b for the remote report' });
    expect(submitted.status).toBe(202);
    const parentId: string = submitted.body.task_id;
    firstParent = parentId;
    await poll(
      async () => proxy.seen.some((s) => s.starts) && a.pid === undefined,
      'A killed after the send',
    );

    await a.start();
    // B's task asks for a permission: A forwards it as its own pending request
    const pending = await poll(async () => {
      const view = (await a.request('GET', `/tasks/${parentId}`)).body;
      return view.status === 'awaiting_permission' ? view.pending : null;
    }, "B's question on A");
    expect(pending).toHaveLength(1);
    expect(pending[0]).toMatchObject({ kind: 'permission', task_id: parentId, tool: 'a2a:b/shell_exec' });
    const answered = await a.request('POST', `/tasks/${parentId}/permissions/${pending[0].request_id}`, {
      decision: 'allow_once',
    });
    expect(answered.status).toBe(202);

    const done = await a.waitFor(parentId, undefined, 60_000);
    expect(done.status).toBe('completed');

    const bTasks = (await b.request('GET', '/tasks?limit=100')).body.tasks as { task_id: string }[];
    expect(bTasks).toHaveLength(1);
    const bTask = (await b.request('GET', `/tasks/${bTasks[0].task_id}`)).body;
    expect(bTask.status).toBe('completed');
    expect(bTask.result).toContain('shell_exec');
    expect(done.result).toBe(`remote answered: step delegate completed: ${bTask.result.trim()}`);
    expect(readFileSync(join(b.workspace, 'remote.txt'), 'utf8')).toBe('remote-ok\n');
    expect(proxy.seen.filter((s) => s.starts)).toHaveLength(1);

    const log = await a.events(parentId);
    const started = log.filter((e) => e.type === 'CHILD_TASK_STARTED');
    expect(started).toHaveLength(1);
    expect(started[0].payload.remote).toMatchObject({ url: proxy.url, message_id: expect.any(String) });
    const updates = log.filter((e) => e.type === 'REMOTE_TASK_UPDATED');
    expect(updates.map((e) => e.payload.state)).toEqual(
      expect.arrayContaining(['input-required', 'completed']),
    );
    expect(updates.every((e) => e.payload.remote_task_id === bTask.task_id)).toBe(true);
    expect(log.filter((e) => e.type === 'CHILD_TASK_ENDED')[0].payload).toMatchObject({
      status: 'completed',
      result: bTask.result,
    });
    // B's own usage rolls up into A's
    expect(done.usage.tool_calls).toBeGreaterThanOrEqual(bTask.usage.tool_calls);
  });

  it('cancelling the parent cancels the remote task', async () => {
    const submitted = await a.request('POST', '/tasks', { input: 'ask b again, then change your mind' });
    const parentId: string = submitted.body.task_id;
    await a.waitFor(parentId, (s) => s === 'awaiting_permission', 60_000);
    const remoteId = (await a.events(parentId)).find((e) => e.type === 'REMOTE_TASK_UPDATED')!.payload
      .remote_task_id as string;
    expect((await b.request('GET', `/tasks/${remoteId}`)).body.status).toBe('awaiting_permission');
    expect((await a.request('POST', `/tasks/${parentId}/cancel`)).status).toBeLessThan(300);
    await b.waitFor(remoteId, undefined, 30_000);
    expect((await b.request('GET', `/tasks/${remoteId}`)).body.status).toBe('cancelled');
    expect((await a.request('GET', `/tasks/${parentId}`)).body.status).toBe('cancelled');
    // every REST answer of both servers so far, as the OpenAPI document describes it
    expect([...(await a.responseMismatches()), ...(await b.responseMismatches())]).toEqual([]);
  });

  it('a replay of the delegating task calls nobody: B is gone, the recorded updates stand in for it', async () => {
    const parentId = firstParent;
    await b.kill();
    const sendsBefore = proxy.seen.length;
    const replay = await runCli(['replay', parentId, '--json'], { cwd: a.dir, env: a.env });
    const answer = JSON.parse(replay.stdout.trim().split('\n').pop()!).replay;
    expect(answer).toMatchObject({ source_task_id: parentId, matches: true });
    expect(answer.compared).toBeGreaterThan(10);
    expect(proxy.seen.length).toBe(sendsBefore);
  });
});
