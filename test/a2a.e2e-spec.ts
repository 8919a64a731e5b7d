import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Part, Role, StreamResponse, Task, TaskState } from '@a2a-js/sdk';
import { Client } from '@a2a-js/sdk/client';
import { LegacyJsonRpcTransport, parseLegacyAgentCard } from '@a2a-js/sdk/compat/v0_3/client';
import { TaskNotCancelableError, TaskNotFoundError, RequestMalformedError } from '@a2a-js/sdk/errors';
import { RuntimeEvent } from '@runledger/contracts';
import { A2ARemoteAgents, remoteContextIdFor, remoteMessageIdFor } from '@runledger/runtime';
import { ApiHarness, TOKENS, bootApi, eventCount, waitForTask } from './api-harness';
import {
  asTask,
  clientOf,
  data,
  fetchWith,
  isFinalTask,
  message,
  requestOf,
  send,
  startReceiver,
  text,
} from './a2a-client';
// eslint-disable-next-line no-restricted-imports
import { a2aUpdatesOf } from '../apps/controller/src/a2a/a2a-mapping';
// eslint-disable-next-line no-restricted-imports
import { verifySignature } from '../apps/controller/src/outbound/outbox';

jest.setTimeout(60_000);

const SIGNING_KEY = 'a2a-e2e-signing-key-0123456789';

const stateOf = (r: StreamResponse): TaskState | undefined =>
  r.payload?.$case === 'task'
    ? r.payload.value.status?.state
    : r.payload?.$case === 'statusUpdate'
      ? r.payload.value.status?.state
      : undefined;
const seqOf = (r: StreamResponse): number =>
  r.payload?.$case === 'task'
    ? r.payload.value.metadata!.runledger.last_seq
    : (r.payload?.value as unknown as { metadata: { runledger: { seq: number } } }).metadata.runledger.seq;

describe('A2A 1.0 through the SDK client', () => {
  let sut: ApiHarness;
  let admin: Client;
  const events = async (taskId: string): Promise<RuntimeEvent[]> =>
    (await sut.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events;

  beforeAll(async () => {
    sut = await bootApi(
      {
        RUNLEDGER_OUTBOUND_SIGNING_KEY: SIGNING_KEY,
        RUNLEDGER_OUTBOUND_BACKOFF_MS: '50',
        RUNLEDGER_AGENTS: JSON.stringify([{ name: 'researcher', description: 'Finds things out.' }]),
      },
      { checkResponses: true },
    );
    admin = await clientOf(sut.url, TOKENS.admin);
  });
  afterAll(async () => {
    await sut.close();
  });

  it('serves the agent card without a token: both bindings at its own URL, skills per agent, bearer security', async () => {
    const res = await sut.request('GET', '/.well-known/agent-card.json', {
      token: null,
      headers: { 'a2a-version': '1.0' },
    });
    expect(res.status).toBe(200);
    expect(res.body.supportedInterfaces).toEqual([
      { url: `${sut.url}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: `${sut.url}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
      { url: `${sut.url}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      { url: `${sut.url}/a2a/rest`, protocolBinding: 'HTTP+JSON', protocolVersion: '0.3' },
    ]);
    expect(res.body.capabilities).toMatchObject({
      streaming: true,
      pushNotifications: true,
      extendedAgentCard: true,
    });
    expect(res.body.skills.map((s: { name: string }) => s.name)).toEqual([
      'orchestrator',
      'coder',
      'researcher',
    ]);
    expect(res.body.securitySchemes.bearer.httpAuthSecurityScheme.scheme).toBe('Bearer');
    expect((await sut.request('POST', '/a2a/jsonrpc', { token: null, body: {} })).status).toBe(401);
  });

  it('a 0.3 client (no A2A-Version): the 0.3 card, and the 0.3 methods through the SDK compat client over the same tasks', async () => {
    const legacy = await sut.request('GET', '/.well-known/agent-card.json', { token: null });
    expect(legacy.status).toBe(200);
    expect(legacy.headers.get('vary')).toMatch(/A2A-Version/i);
    expect(legacy.body).toMatchObject({
      protocolVersion: '0.3',
      url: `${sut.url}/a2a/jsonrpc`,
      preferredTransport: 'JSONRPC',
      additionalInterfaces: [{ url: `${sut.url}/a2a/rest`, transport: 'HTTP+JSON' }],
    });
    const old = new Client(
      new LegacyJsonRpcTransport({ endpoint: legacy.body.url, fetchImpl: fetchWith(TOKENS.admin) }),
      parseLegacyAgentCard(legacy.body),
    );
    const task = asTask(await old.sendMessage(send(message([text('run echo hello-0.3')]))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((await old.getTask({ tenant: '', id: task.id })).artifacts[0].parts[0].content).toEqual({
      $case: 'text',
      value: expect.stringContaining('hello-0.3'),
    });
    // the same task over 1.0
    expect((await admin.getTask({ tenant: '', id: task.id })).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    await expect(old.getTask({ tenant: '', id: 'task_none' })).rejects.toBeInstanceOf(TaskNotFoundError);
    // a version this agent does not speak
    const before = await eventCount(sut);
    const v2 = await sut.request('POST', '/a2a/jsonrpc', {
      headers: { 'a2a-version': '2.0' },
      body: {
        jsonrpc: '2.0',
        id: 1,
        method: 'SendMessage',
        params: { message: { messageId: 'm', parts: [] } },
      },
    });
    expect(v2.body.error).toMatchObject({
      code: -32009,
      message: expect.stringMatching(/2\.0.*not supported/),
    });
    expect(await eventCount(sut)).toBe(before);
  });

  it('a remote delegate that speaks only 0.3 (its card says so) is spoken to in 0.3: the task is sent, followed to its end', async () => {
    const legacyCard = (await sut.request('GET', '/.well-known/agent-card.json', { token: null })).body;
    delete legacyCard.supportedInterfaces;
    const served = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(legacyCard)),
    );
    await new Promise<void>((r) => served.listen(0, '127.0.0.1', r));
    const cardUrl = `http://127.0.0.1:${(served.address() as AddressInfo).port}/card.json`;
    process.env.RL_A2A_LEGACY_HEADERS = JSON.stringify({ authorization: `Bearer ${TOKENS.admin}` });
    const seen: string[] = [];
    // the requests as they leave for the agent: which protocol version, which method
    const realFetch = globalThis.fetch;
    const spy = jest.spyOn(globalThis, 'fetch').mockImplementation((input, init) => {
      if (String(input) === `${sut.url}/a2a/jsonrpc`)
        seen.push(
          `${new Headers(init?.headers).get('a2a-version')} ${(JSON.parse(String(init?.body)) as { method: string }).method}`,
        );
      return realFetch(input, init);
    });
    try {
      const call = {
        call_id: 'c-legacy',
        agent: {
          name: 'old',
          description: '',
          models: {},
          tools: null,
          instructions: '',
          a2a: { card_url: cardUrl, headers_from: 'env:RL_A2A_LEGACY_HEADERS' },
        },
        message_id: remoteMessageIdFor(`task_legacy_${Date.now()}`, 'c-legacy'),
        context_id: remoteContextIdFor(`task_legacy_${Date.now()}`, 'c-legacy'),
        input: 'run echo spoken-in-0.3',
      };
      const remote = new A2ARemoteAgents({ attempts: 1, backoffMs: 10, maxBackoffMs: 10 });
      const signal = new AbortController().signal;
      let step = await remote.open(call, signal);
      while (step?.kind === 'update' && !['completed', 'failed'].includes(step.snapshot.state))
        step = await remote.next(call, step.snapshot, signal);
      expect(step).toMatchObject({ kind: 'update', snapshot: { state: 'completed' } });
      const snapshot = step!.kind === 'update' ? step!.snapshot : null;
      expect(snapshot!.artifacts.map((a) => a.text).join('\n')).toContain('spoken-in-0.3');
      expect(seen[0]).toBe('0.3 message/send');
      expect(seen.every((m) => m.startsWith('0.3 '))).toBe(true);
      expect(seen.some((m) => m.endsWith('tasks/get'))).toBe(true);
    } finally {
      spy.mockRestore();
      delete process.env.RL_A2A_LEGACY_HEADERS;
      await new Promise((r) => served.close(r));
    }
  });

  it('GetExtendedAgentCard: a token gets the card with a skill per tool, naming the caller', async () => {
    const reader = await clientOf(sut.url, TOKENS.reader);
    const card = await reader.getAgentCard();
    const ids = card.skills.map((s) => s.id);
    expect(ids.slice(0, 3)).toEqual(['orchestrator', 'agent:coder', 'agent:researcher']);
    expect(ids).toEqual(expect.arrayContaining(['tool:shell_exec', 'tool:file_write', 'tool:file_read']));
    expect(card.description).toMatch(/This card is for reader, whose token has the scopes tasks:read\.$/);
    const anonymous = await sut.request('POST', '/a2a/jsonrpc', {
      token: null,
      headers: { 'a2a-version': '1.0' },
      body: { jsonrpc: '2.0', id: 1, method: 'GetExtendedAgentCard', params: {} },
    });
    expect(anonymous.status).toBe(401);
  });

  it('SendMessage runs a task to its answer; the same messageId makes one task; GetTask and ListTasks read it', async () => {
    const m = message([text('run echo hello-a2a')], { contextId: `ctx-${Date.now()}` });
    const task = asTask(await admin.sendMessage(send(m)));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.contextId).toBe(m.contextId);
    const artifact = task.artifacts[0].parts[0].content;
    expect(artifact).toEqual({ $case: 'text', value: expect.stringContaining('hello-a2a') });
    expect(task.metadata?.runledger).toMatchObject({ stop_reason: 'completed', usage: expect.any(Object) });

    const again = asTask(await admin.sendMessage(send(m)));
    expect(again.id).toBe(task.id);
    const byApi = await sut.request('GET', `/tasks/${task.id}`);
    expect(byApi.body.session_id).toBe(m.contextId);

    const got = await admin.getTask({ tenant: '', id: task.id, historyLength: 1 });
    expect(got.history).toHaveLength(1);
    expect(got.history[0].role).toBe(Role.ROLE_AGENT);
    const full = await admin.getTask({ tenant: '', id: task.id });
    expect(full.history[0]).toMatchObject({ messageId: m.messageId, role: Role.ROLE_USER });

    const listed = await admin.listTasks({
      tenant: '',
      contextId: m.contextId,
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageToken: '',
      statusTimestampAfter: undefined,
      includeArtifacts: true,
    });
    expect(listed.tasks.map((t) => t.id)).toEqual([task.id]);
    expect(listed.totalSize).toBe(1);
    expect(listed.tasks[0].artifacts).toHaveLength(1);

    const rest = await clientOf(sut.url, TOKENS.reader, 'HTTP+JSON');
    expect((await rest.getTask({ tenant: '', id: task.id })).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
  });

  it('a permission request is input-required with the request in the message, answered by a data part', async () => {
    const waiting = asTask(
      await admin.sendMessage(send(message([text('run echo approved > a2a-approved.txt')]))),
    );
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const asked = requestOf(waiting);
    expect(asked).toMatchObject({ kind: 'permission', tool: 'shell_exec', request_id: expect.any(String) });

    const writer = await clientOf(sut.url, TOKENS.writer);
    const answer = message([data({ request_id: asked.request_id, decision: 'allow_once' })], {
      taskId: waiting.id,
    });
    // answering needs the approvals scope
    await expect(writer.sendMessage(send(answer))).rejects.toThrow();
    const done = asTask(await admin.sendMessage(send(answer)));
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const log = await events(waiting.id);
    expect(log.find((e) => e.type === 'PERMISSION_RESOLVED')?.payload).toMatchObject({
      decision: 'allow_once',
    });
  });

  it('a file the task wrote in the allowed root is an artifact: in the stream before the final status, and in GetTask while it exists', async () => {
    const waiting = asTask(
      await admin.sendMessage(send(message([text('write notes/a2a-notes.md: # Notes\nhello artifact')]))),
    );
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const asked = requestOf(waiting);
    expect(asked).toMatchObject({ tool: 'file_write' });
    const answer = message([data({ request_id: asked.request_id, decision: 'allow_once' })], {
      taskId: waiting.id,
    });
    const streamed: StreamResponse[] = [];
    for await (const r of admin.sendMessageStream(send(answer))) streamed.push(r);
    expect(stateOf(streamed[streamed.length - 1])).toBe(TaskState.TASK_STATE_COMPLETED);
    const artifacts = streamed.flatMap((r) =>
      r.payload?.$case === 'artifactUpdate' ? [r.payload.value.artifact!] : [],
    );
    const file = artifacts.find((a) => a.name === 'notes/a2a-notes.md');
    expect(file?.parts[0]).toMatchObject({
      content: { $case: 'text', value: '# Notes\nhello artifact' },
      filename: 'a2a-notes.md',
      mediaType: 'text/markdown',
    });
    expect(artifacts.map((a) => a.name)).toContain('result');

    const got = await admin.getTask({ tenant: '', id: waiting.id });
    expect(got.artifacts.map((a) => a.name)).toEqual(['result', 'notes/a2a-notes.md']);
    expect(got.artifacts[1].artifactId).toBe(`${waiting.id}:file:notes/a2a-notes.md`);
    // the artifact is the file as it is: one deleted since is no longer shown
    rmSync(join(sut.workspace, 'notes', 'a2a-notes.md'));
    expect((await admin.getTask({ tenant: '', id: waiting.id })).artifacts.map((a) => a.name)).toEqual([
      'result',
    ]);
  });

  it('streams until input-required; a dropped subscription resubscribes to every later update once, in order', async () => {
    const stream = admin.sendMessageStream(send(message([text('run echo streamed > a2a-streamed.txt')])));
    const first: StreamResponse[] = [];
    for await (const r of stream) first.push(r);
    expect(first[0].payload?.$case).toBe('task');
    expect(stateOf(first[first.length - 1])).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const seqs = first.map(seqOf);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);
    const taskId = (first[0].payload!.value as Task).id;

    // a subscriber that drops after the snapshot
    const dropped = new AbortController();
    const gone = admin.resubscribeTask({ tenant: '', id: taskId }, { signal: dropped.signal });
    const snapshot = (await gone.next()).value as StreamResponse;
    expect(stateOf(snapshot)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    dropped.abort();
    await gone.return(undefined).catch(() => undefined);

    const again = admin.resubscribeTask({ tenant: '', id: taskId });
    const resumed = (await again.next()).value as StreamResponse;
    const from = seqOf(resumed);
    expect(from).toBe(seqOf(snapshot));
    const request = (resumed.payload!.value as Task).status!.message!.parts.find(
      (p) => p.content?.$case === 'data',
    )!;
    const requestId = (request.content as { value: { request_id: string } }).value.request_id;
    await admin.sendMessage(
      send(message([data({ request_id: requestId, decision: 'allow_once' })], { taskId }), {
        returnImmediately: true,
      }),
    );
    const later: StreamResponse[] = [];
    for await (const r of again) later.push(r);
    expect(stateOf(later[later.length - 1])).toBe(TaskState.TASK_STATE_COMPLETED);
    // exactly the log's updates after the snapshot: none missing, none twice, in order
    const expected = a2aUpdatesOf(await events(taskId), from).map((u) => StreamResponse.toJSON(u.update));
    expect(later.map((r) => StreamResponse.toJSON(r))).toEqual(expected);
  });

  it('CancelTask cancels a waiting task; a second cancel is TaskNotCancelable', async () => {
    const waiting = asTask(await admin.sendMessage(send(message([text('run touch a2a-cancel.txt')]))));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const cancelled = await admin.cancelTask({ tenant: '', id: waiting.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await expect(
      admin.cancelTask({ tenant: '', id: waiting.id, metadata: undefined }),
    ).rejects.toBeInstanceOf(TaskNotCancelableError);
  });

  it('bad input gets A2A errors and writes nothing', async () => {
    const before = await eventCount(sut);
    await expect(admin.getTask({ tenant: '', id: 'task_nope' })).rejects.toBeInstanceOf(TaskNotFoundError);
    const file: Part = {
      content: { $case: 'url', value: 'https://example.com/x' },
      metadata: undefined,
      filename: 'x',
      mediaType: '',
    };
    await expect(admin.sendMessage(send(message([file])))).rejects.toBeInstanceOf(RequestMalformedError);
    await expect(admin.sendMessage(send(message([text('   ')])))).rejects.toBeInstanceOf(
      RequestMalformedError,
    );
    await expect(
      admin.sendMessage(
        send(message([data({ request_id: 'perm_x', decision: 'maybe' })], { taskId: 'task_nope' })),
      ),
    ).rejects.toBeInstanceOf(TaskNotFoundError);
    const raw = await sut.request('POST', '/a2a/jsonrpc', {
      headers: { 'a2a-version': '1.0' },
      body: { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: { pageSize: 1000 } },
    });
    expect(raw.body.error.code).toBe(-32602);
    expect(await eventCount(sut)).toBe(before);
  });

  it('the last push notification is the whole Task: its answer and the files it wrote as artifacts; a denied task ends with one too', async () => {
    const receiver = await startReceiver();
    const push = (id: string) => ({
      taskPushNotificationConfig: {
        tenant: '',
        id,
        taskId: '',
        url: receiver.url,
        token: '',
        authentication: undefined,
      },
    });
    const lastPushed = async (taskId: string, state: TaskState): Promise<Task> => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const found = receiver.taken
          .map((r) => StreamResponse.fromJSON(JSON.parse(r.body)))
          .find(
            (r) =>
              r.payload?.$case === 'task' &&
              r.payload.value.id === taskId &&
              r.payload.value.status?.state === state,
          );
        if (found?.payload?.$case === 'task') return found.payload.value;
        if (Date.now() > deadline) throw new Error(`no final push for ${taskId}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    };
    try {
      const waiting = asTask(
        await admin.sendMessage(
          send(message([text('write notes/pushed.md: pushed file')]), push('files-cfg')),
        ),
      );
      const asked = requestOf(waiting);
      await admin.sendMessage(
        send(
          message([data({ request_id: asked.request_id, decision: 'allow_once' })], { taskId: waiting.id }),
        ),
      );
      const done = await lastPushed(waiting.id, TaskState.TASK_STATE_COMPLETED);
      expect(done.artifacts.map((a) => a.name)).toEqual(['result', 'notes/pushed.md']);
      expect(done.artifacts[1]).toMatchObject({
        artifactId: `${waiting.id}:file:notes/pushed.md`,
        parts: [{ content: { $case: 'text', value: 'pushed file' }, filename: 'pushed.md' }],
      });

      const refused = asTask(
        await admin.sendMessage(send(message([text('write notes/refused.md: no')]), push('denied-cfg'))),
      );
      await admin.sendMessage(
        send(
          message([data({ request_id: requestOf(refused).request_id, decision: 'deny' })], {
            taskId: refused.id,
          }),
        ),
      );
      const denied = await lastPushed(refused.id, TaskState.TASK_STATE_FAILED);
      expect(denied.metadata?.runledger).toMatchObject({
        status: 'failed',
        stop_reason: 'permission_denied',
      });
      expect(denied.artifacts.map((a) => a.name)).not.toContain('notes/refused.md');
    } finally {
      await receiver.close();
    }
  });

  it('push notifications: signed, retried after the receiver fails first, recorded in the log', async () => {
    let calls = 0;
    const receiver = await startReceiver(() => (++calls === 1 ? 503 : 200));
    const { url, taken: received } = receiver;
    try {
      const task = asTask(
        await admin.sendMessage(
          send(message([text('run echo pushed')]), {
            taskPushNotificationConfig: {
              tenant: '',
              id: '',
              taskId: '',
              url,
              token: 'rcv-token',
              authentication: undefined,
            },
          }),
        ),
      );
      await waitForTask(sut, task.id);
      const deadline = Date.now() + 15_000;
      while (!received.some((r) => isFinalTask(r.body)) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 25));
      expect(received.some((r) => isFinalTask(r.body))).toBe(true);
      for (const r of received) {
        expect(verifySignature(SIGNING_KEY, r.body, r.headers['runledger-signature'] as string)).toBe(true);
        expect(
          verifySignature('another-key-0123456789', r.body, r.headers['runledger-signature'] as string),
        ).toBe(false);
        expect(r.headers['x-a2a-notification-token']).toBe('rcv-token');
      }
      const outboundEvents = async () =>
        (
          await sut.request(
            'GET',
            `/admin/events?task_id=${encodeURIComponent(`outbound:${task.id}`)}&limit=1000`,
          )
        ).body.events as RuntimeEvent[];
      // the last outcome is recorded once the receiver has answered
      let outbound = await outboundEvents();
      while (
        outbound.filter((e) => e.type === 'DELIVERY_SUCCEEDED').length < received.length &&
        Date.now() < deadline
      ) {
        await new Promise((r) => setTimeout(r, 25));
        outbound = await outboundEvents();
      }
      const types = outbound.map((e) => e.type);
      expect(types[0]).toBe('CALLBACK_REGISTERED');
      expect(types).toContain('DELIVERY_FAILED');
      const failed = outbound.find((e) => e.type === 'DELIVERY_FAILED')!;
      expect(failed.payload).toMatchObject({ attempt: 1, status_code: 503, retry_at: expect.any(String) });
      const succeeded = outbound.filter((e) => e.type === 'DELIVERY_SUCCEEDED');
      expect(succeeded).toHaveLength(received.length);
      // the failed update was delivered on its second attempt, each update once
      expect(succeeded[0].payload).toMatchObject({
        seq: (failed.payload as { seq: number }).seq,
        attempt: 2,
      });
      const configs = await admin.listTaskPushNotificationConfig({
        tenant: '',
        taskId: task.id,
        pageSize: 0,
        pageToken: '',
      });
      expect(configs.configs).toEqual([expect.objectContaining({ url, token: 'rcv-token' })]);
      await admin.deleteTaskPushNotificationConfig({
        tenant: '',
        taskId: task.id,
        id: configs.configs[0].id,
      });
      expect(
        (
          await admin.listTaskPushNotificationConfig({
            tenant: '',
            taskId: task.id,
            pageSize: 0,
            pageToken: '',
          })
        ).configs,
      ).toEqual([]);
    } finally {
      await receiver.close();
    }
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('A2A: secrets and restarts', () => {
  it('a secret request is auth-required, answered by a data part; the value reaches no event', async () => {
    const sut = await bootApi({}, { checkResponses: true });
    try {
      const admin = await clientOf(sut.url, TOKENS.admin);
      const SECRET = 'a2a-secret-value-7f3k2';
      const asked = asTask(
        await admin.sendMessage(
          send(message([text('run sudo -n true 2>/dev/null; cat > /dev/null; echo took-it')])),
        ),
      );
      expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const secretAsk = asTask(
        await admin.sendMessage(
          send(
            message([data({ request_id: requestOf(asked).request_id, decision: 'allow_once' })], {
              taskId: asked.id,
            }),
          ),
        ),
      );
      expect(secretAsk.status?.state).toBe(TaskState.TASK_STATE_AUTH_REQUIRED);
      expect(requestOf(secretAsk)).toMatchObject({ kind: 'secret', secret_name: 'sudo_password' });
      const done = asTask(
        await admin.sendMessage(
          send(
            message([data({ request_id: requestOf(secretAsk).request_id, secret: SECRET })], {
              taskId: asked.id,
            }),
          ),
        ),
      );
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      const log = await sut.request('GET', `/tasks/${asked.id}/events?limit=1000`);
      expect(log.text).not.toContain(SECRET);
      expect(log.body.events.map((e: RuntimeEvent) => e.type)).toContain('SECRET_PROVIDED');
      expect(sut.logs.join('\n')).not.toContain(SECRET);
      expect(sut.responseMismatches).toEqual([]);
    } finally {
      await sut.close();
    }
  });

  it('deliveries pending at shutdown are found in the log after a restart and delivered once each', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-a2a-restart-'));
    const env = {
      RUNLEDGER_DB: join(dir, 'runledger.db'),
      RUNLEDGER_OUTBOUND_SIGNING_KEY: SIGNING_KEY,
      RUNLEDGER_OUTBOUND_BACKOFF_MS: '200',
    };
    let up = false;
    const receiver = await startReceiver(() => (up ? 200 : 503));
    try {
      const first = await bootApi(env, { checkResponses: true });
      let taskId: string;
      try {
        const admin = await clientOf(first.url, TOKENS.admin);
        const task = asTask(
          await admin.sendMessage(
            send(message([text('run echo restarted')]), {
              taskPushNotificationConfig: {
                tenant: '',
                id: 'cfg-1',
                taskId: '',
                url: receiver.url,
                token: '',
                authentication: undefined,
              },
            }),
          ),
        );
        taskId = task.id;
        // the receiver is down: the first update fails and waits for its retry
        for (let i = 0; i < 200; i++) {
          const log = await first.request('GET', `/admin/events?task_id=outbound:${taskId}&limit=1000`);
          if (log.body.events.some((e: RuntimeEvent) => e.type === 'DELIVERY_FAILED')) break;
          await new Promise((r) => setTimeout(r, 25));
        }
        expect(first.responseMismatches).toEqual([]);
      } finally {
        await first.close();
      }
      up = true;
      const second = await bootApi(env, { checkResponses: true });
      try {
        const deadline = Date.now() + 15_000;
        while (!receiver.taken.some((r) => isFinalTask(r.body)) && Date.now() < deadline)
          await new Promise((r) => setTimeout(r, 25));
        const seqs = receiver.taken.map((r) => {
          const b = JSON.parse(r.body) as Record<
            string,
            { metadata: { runledger: { seq?: number; last_seq?: number } } }
          >;
          const v = b.statusUpdate ?? b.task;
          return v.metadata.runledger.seq ?? v.metadata.runledger.last_seq!;
        });
        expect(receiver.taken.some((r) => isFinalTask(r.body))).toBe(true);
        expect(seqs).toEqual([...new Set(seqs)].sort((a, b) => a - b));
        for (const r of receiver.taken)
          expect(verifySignature(SIGNING_KEY, r.body, r.headers['runledger-signature'] as string)).toBe(true);
        const log = await second.request('GET', `/admin/events?task_id=outbound:${taskId}&limit=1000`);
        expect(
          log.body.events.filter((e: RuntimeEvent) => e.type === 'DELIVERY_FAILED').length,
        ).toBeGreaterThan(0);
        expect(second.responseMismatches).toEqual([]);
      } finally {
        await second.close();
      }
    } finally {
      await receiver.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
