import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describePostgres, useTestPostgres, waitForSignalStep, writePlanScript } from '@runledger/testing';
import { ApiHarness, bootApi } from './api-harness';
// eslint-disable-next-line no-restricted-imports
import { signatureOf } from '../apps/controller/src/outbound/outbox';

/**
 * Inbound webhooks through the real app: GitHub-style deliveries start tasks, Runledger-style ones
 * (as the outbound deliveries sign them) signal a waiting task; a delivery id received again, also
 * at once and on two PostgreSQL instances, starts one task or sends one signal; bad signatures,
 * unknown hooks and bodies the mapping cannot read are refused with nothing written.
 */
jest.setTimeout(60_000);

const GH_SECRET = 'gh-hook-secret-0123456789';
const CI_SECRET = 'ci-hook-secret-9876543210';

const HOOKS = [
  {
    name: 'gh',
    secret_env: 'RL_TEST_GH_SECRET',
    signature: 'github',
    when: { 'headers.x-github-event': ['push', 'ping'] },
    task: {
      input: 'push to {{body.ref}} by {{body.pusher.name}}',
      session_id: 'repo-{{body.repository.id}}',
    },
  },
  {
    name: 'ci',
    secret_env: 'RL_TEST_CI_SECRET',
    signal: { task_id: '{{body.task_id}}', name: 'ci', payload: 'body.result' },
  },
];

/** the secrets as the environment holds them: the app reads them once at boot, then drops them */
function hookEnv(): Record<string, string> {
  process.env.RL_TEST_GH_SECRET = GH_SECRET;
  process.env.RL_TEST_CI_SECRET = CI_SECRET;
  return {
    RUNLEDGER_HOOKS: JSON.stringify(HOOKS),
    RL_TEST_GH_SECRET: GH_SECRET,
    RL_TEST_CI_SECRET: CI_SECRET,
    RUNLEDGER_MEMORY: 'off',
    RUNLEDGER_CRITIC: 'off',
  };
}

/** every task waits for signal `ci`, then answers */
const writeScript = (dir: string): string =>
  writePlanScript(dir, [waitForSignalStep('ci', { timeout_ms: 30_000 })]);

const push = (ref: string, repo = 7) =>
  JSON.stringify({ ref, pusher: { name: 'ada' }, repository: { id: repo } });

function github(body: string, delivery: string, event = 'push', secret = GH_SECRET): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-github-event': event,
    'x-github-delivery': delivery,
    'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`,
  };
}

function runledger(
  body: string,
  delivery: string,
  at = Date.now(),
  secret = CI_SECRET,
): Record<string, string> {
  return {
    'content-type': 'application/json',
    'runledger-delivery': delivery,
    'runledger-signature': signatureOf(secret, body, Math.floor(at / 1000)),
  };
}

const post = (api: ApiHarness, hook: string, body: string, headers: Record<string, string>) =>
  api.request('POST', `/hooks/${hook}`, { token: null, raw: body, headers });

const headOf = async (api: ApiHarness): Promise<number> =>
  (await api.request('GET', '/admin/events?limit=1')).body.head_position as number;

const receipts = async (api: ApiHarness) =>
  (await api.request('GET', '/admin/events?type=HOOK_RECEIVED&limit=1000')).body.events as {
    payload: Record<string, unknown>;
  }[];

async function untilWaitingForSignal(api: ApiHarness, id: string): Promise<void> {
  for (const deadline = Date.now() + 20_000; ;) {
    const t = (await api.request('GET', `/tasks/${id}`)).body;
    if (t.waiting_for?.kind === 'signal') return;
    if (Date.now() > deadline) throw new Error(`task ${id} never waited for its signal: ${t.status}`);
    await new Promise((r) => setTimeout(r, 30));
  }
}

async function untilEnded(api: ApiHarness, id: string) {
  for (const deadline = Date.now() + 20_000; ;) {
    const t = (await api.request('GET', `/tasks/${id}`)).body;
    if (['completed', 'failed', 'cancelled'].includes(t.status)) return t;
    if (Date.now() > deadline) throw new Error(`task ${id} still ${t.status}`);
    await new Promise((r) => setTimeout(r, 30));
  }
}

describe('POST /hooks/:name on SQLite', () => {
  let api: ApiHarness;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-hooks-'));
    api = await bootApi(
      { ...hookEnv(), RUNLEDGER_MODEL: `scripted:${writeScript(dir)}`, LOG_LEVEL: 'debug' },
      { checkResponses: true },
    );
  });
  afterAll(async () => {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(() => expect(api.responseMismatches).toEqual([]));

  it('a GitHub push starts one task, filled from the body; the same delivery again (also 5 at once) starts no other', async () => {
    const body = push('refs/heads/main');
    const first = await post(api, 'gh', body, github(body, 'gh-delivery-1'));
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({
      hook: 'gh',
      delivery_id: 'gh-delivery-1',
      action: 'task',
      duplicate: false,
    });
    const taskId = first.body.task_id as string;
    const [received] = (await api.request('GET', `/tasks/${taskId}/events?limit=1`)).body.events;
    expect(received.payload).toMatchObject({
      input: 'push to refs/heads/main by ada',
      session_id: 'repo-7',
      source: 'hook',
      idempotency_key: 'hook:gh:gh-delivery-1',
    });

    const again = await post(api, 'gh', body, github(body, 'gh-delivery-1'));
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ task_id: taskId, action: 'task', duplicate: true });

    const body2 = push('refs/heads/dev', 8);
    const copies = await Promise.all(
      Array.from({ length: 5 }, () => post(api, 'gh', body2, github(body2, 'gh-delivery-2'))),
    );
    expect(copies.map((c) => c.status)).toEqual([202, 202, 202, 202, 202]);
    expect(new Set(copies.map((c) => c.body.task_id)).size).toBe(1);
    expect(copies.filter((c) => !c.body.duplicate).length).toBeLessThanOrEqual(1);
    expect((await api.request('GET', '/tasks?session_id=repo-8')).body.tasks).toHaveLength(1);
    const mine = (await receipts(api)).filter((r) => r.payload.delivery_id === 'gh-delivery-2');
    expect(mine).toHaveLength(1);
    expect(mine[0].payload).toMatchObject({ hook: 'gh', action: 'task', task_id: copies[0].body.task_id });
    expect(mine[0].payload.body_sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a delivery its `when` does not match is recorded as ignored and starts nothing', async () => {
    const body = push('refs/heads/x', 9);
    const res = await post(api, 'gh', body, github(body, 'gh-issues-1', 'issues'));
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ action: 'ignored', task_id: null, duplicate: false });
    expect((await api.request('GET', '/tasks?session_id=repo-9')).body.tasks).toHaveLength(0);
  });

  it("GitHub's form-encoded payload= is read as JSON; a hook's task follows its session's strategy (reject: 409, nothing written)", async () => {
    const form = `payload=${encodeURIComponent(push('refs/heads/form', 12))}`;
    const first = await post(api, 'gh', form, {
      ...github(form, 'gh-form-1'),
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(first.status).toBe(202);
    const [received] = (await api.request('GET', `/tasks/${first.body.task_id}/events?limit=1`)).body.events;
    expect(received.payload.input).toBe('push to refs/heads/form by ada');

    // the session's first task waits for its signal: the session is busy, and its strategy is reject
    expect((await api.request('PUT', '/sessions/repo-12', { body: { on_busy: 'reject' } })).status).toBe(200);
    const before = await headOf(api);
    const body = push('refs/heads/second', 12);
    const busy = await post(api, 'gh', body, github(body, 'gh-form-2'));
    expect(busy.status).toBe(409);
    expect(busy.body).toMatchObject({ error: 'session_busy', details: { task_id: first.body.task_id } });
    expect(await headOf(api)).toBe(before);
  });

  it('a crash after the task and before the receipt is healed by the retry: the same task, one receipt', async () => {
    // as a crash leaves it: the task submitted under the delivery's key, no HOOK_RECEIVED yet
    const body = push('refs/heads/crash', 13);
    const left = await api.request('POST', '/tasks', {
      body: { input: 'push to refs/heads/crash by ada', session_id: 'repo-13' },
      headers: { 'idempotency-key': 'hook:gh:gh-crash-1' },
    });
    expect(left.status).toBe(202);
    const retry = await post(api, 'gh', body, github(body, 'gh-crash-1'));
    expect(retry.status).toBe(202);
    expect(retry.body).toMatchObject({ task_id: left.body.task_id, duplicate: false });
    expect((await api.request('GET', '/tasks?session_id=repo-13')).body.tasks).toHaveLength(1);
    expect((await receipts(api)).filter((r) => r.payload.delivery_id === 'gh-crash-1')).toHaveLength(1);
  });

  it('refusals write nothing: bad or missing signature 401, unknown hook 404, unreadable or unmappable body 400', async () => {
    const before = await headOf(api);
    const body = push('refs/heads/main', 10);
    const wrong = await post(api, 'gh', body, github(body, 'gh-bad-1', 'push', 'not-the-secret-00000'));
    expect(wrong.status).toBe(401);
    expect(wrong.body).toMatchObject({ error: 'unauthorized', message: 'hook gh: signature does not match' });
    expect(wrong.headers.get('www-authenticate')).toBeNull();
    const { 'x-hub-signature-256': _dropped, ...unsigned } = github(body, 'gh-bad-2');
    expect((await post(api, 'gh', body, unsigned)).body.message).toBe(
      'hook gh: missing signature header x-hub-signature-256',
    );
    // signed for another body
    expect((await post(api, 'gh', push('refs/heads/evil', 10), github(body, 'gh-bad-3'))).status).toBe(401);
    const stale = await post(api, 'ci', '{}', runledger('{}', 'ci-stale', Date.now() - 600_000));
    expect(stale.status).toBe(401);
    expect(stale.body.message).toMatch(/from the server's clock \(tolerance 300 s\)/);

    const unknown = await post(api, 'nope', body, github(body, 'x'));
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ error: 'not_found', details: { hook: 'nope' } });
    expect((await post(api, 'bad name!', body, github(body, 'x'))).status).toBe(400);

    const notJson = '{"ref": ';
    const broken = await post(api, 'gh', notJson, github(notJson, 'gh-bad-4'));
    expect(broken.status).toBe(400);
    expect(broken.body).toMatchObject({ error: 'validation_error', message: 'the body is not valid JSON' });
    const lacking = JSON.stringify({ ref: 'refs/heads/main', repository: { id: 11 } });
    const unmapped = await post(api, 'gh', lacking, github(lacking, 'gh-bad-5'));
    expect(unmapped.status).toBe(400);
    expect(unmapped.body.details).toEqual({ hook: 'gh', missing: ['task.input: {{body.pusher.name}}'] });
    const noTask = JSON.stringify({ task_id: 'task_does_not_exist', result: {} });
    expect((await post(api, 'ci', noTask, runledger(noTask, 'ci-bad-6'))).status).toBe(404);
    const otherStream = JSON.stringify({ task_id: 'system:schedules', result: {} });
    expect((await post(api, 'ci', otherStream, runledger(otherStream, 'ci-bad-7'))).status).toBe(400);

    const huge = JSON.stringify({ ref: 'x'.repeat(1_100_000) });
    const tooLarge = await post(api, 'gh', huge, github(huge, 'gh-bad-8'));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error).toEqual(expect.any(String));

    expect(await headOf(api)).toBe(before);
  });

  it('a signed delivery signals the task its body names: once per delivery id; a task that ended takes no more', async () => {
    const started = await api.request('POST', '/tasks', { body: { input: 'build, then wait for CI' } });
    const taskId = started.body.task_id as string;
    await untilWaitingForSignal(api, taskId);
    const body = JSON.stringify({ task_id: taskId, result: { conclusion: 'success', run: 42 } });
    const copies = await Promise.all(
      Array.from({ length: 4 }, () => post(api, 'ci', body, runledger(body, 'ci-run-42'))),
    );
    expect(copies.map((c) => c.status)).toEqual([202, 202, 202, 202]);
    expect(new Set(copies.map((c) => c.body.signal_id)).size).toBe(1);
    expect(copies[0].body).toMatchObject({ action: 'signal', task_id: taskId, signal_name: 'ci' });
    const ended = await untilEnded(api, taskId);
    expect(ended.status).toBe('completed');
    const events = (await api.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as {
      type: string;
      payload: Record<string, unknown>;
    }[];
    expect(events.filter((e) => e.type === 'SIGNAL_RECEIVED')).toHaveLength(1);
    const step = events.find((e) => e.type === 'STEP_COMPLETED')!;
    expect(JSON.stringify(step.payload)).toContain('"conclusion":"success"');

    const before = await headOf(api);
    const late = JSON.stringify({ task_id: taskId, result: { run: 43 } });
    const refused = await post(api, 'ci', late, runledger(late, 'ci-run-43'));
    expect(refused.status).toBe(409);
    expect(await headOf(api)).toBe(before);
  });

  it('GET /hooks lists the hooks without their secrets, and no secret reaches a response or the log', async () => {
    const res = await api.request('GET', '/hooks', { token: null });
    expect(res.status).toBe(401);
    const list = await api.request('GET', '/hooks');
    expect(list.status).toBe(200);
    expect(list.body.hooks.map((h: { name: string }) => h.name)).toEqual(['gh', 'ci']);
    expect(list.body.hooks[0]).toMatchObject({
      signature: 'github',
      signature_header: 'x-hub-signature-256',
      secret_env: 'RL_TEST_GH_SECRET',
    });
    expect(list.body.hooks[1]).toMatchObject({
      signature: 'runledger',
      signature_header: 'runledger-signature',
    });
    const everything = [list.text, ...api.logs].join('\n');
    expect(everything).not.toContain(GH_SECRET);
    expect(everything).not.toContain(CI_SECRET);
    // the variables are dropped once the hooks hold their secrets
    expect(process.env.RL_TEST_GH_SECRET).toBeUndefined();
  });
});

describePostgres('POST /hooks/:name on PostgreSQL: two instances over one database', () => {
  const pg = useTestPostgres('rl_hooks');

  it('copies of one delivery sent to both instances at once start one task and send one signal', async () => {
    const schema = await pg.freshSchema({ migrate: false });
    await schema.handle.close();
    const dir = mkdtempSync(join(tmpdir(), 'rl-hooks-pg-'));
    const env = {
      RUNLEDGER_DB: schema.url,
      RUNLEDGER_PG_SCHEMA: schema.schema,
      RUNLEDGER_DATA_DIR: dir,
      RUNLEDGER_MODEL: `scripted:${writeScript(dir)}`,
    };
    const servers: ApiHarness[] = [];
    try {
      servers.push(await bootApi({ ...hookEnv(), ...env }, { checkResponses: true }));
      servers.push(await bootApi({ ...hookEnv(), ...env }, { checkResponses: true }));
      const [a, b] = servers;
      const body = push('refs/heads/pg', 70);
      const copies = await Promise.all(
        Array.from({ length: 6 }, (_, i) => post(i % 2 ? b : a, 'gh', body, github(body, 'pg-delivery-1'))),
      );
      expect(copies.map((c) => c.status)).toEqual([202, 202, 202, 202, 202, 202]);
      const taskId = copies[0].body.task_id as string;
      expect(new Set(copies.map((c) => c.body.task_id))).toEqual(new Set([taskId]));
      expect((await a.request('GET', '/tasks?session_id=repo-70')).body.tasks).toHaveLength(1);
      expect((await receipts(b)).filter((r) => r.payload.delivery_id === 'pg-delivery-1')).toHaveLength(1);

      // the hook's task waits for CI; CI's delivery reaches both instances
      await untilWaitingForSignal(a, taskId);
      const ci = JSON.stringify({ task_id: taskId, result: { conclusion: 'success' } });
      const signals = await Promise.all(
        Array.from({ length: 6 }, (_, i) => post(i % 2 ? a : b, 'ci', ci, runledger(ci, 'pg-ci-1'))),
      );
      expect(signals.map((s) => s.status)).toEqual([202, 202, 202, 202, 202, 202]);
      expect((await untilEnded(b, taskId)).status).toBe('completed');
      const events = (await b.request('GET', `/tasks/${taskId}/events?limit=1000`)).body.events as {
        type: string;
        sequence: number;
      }[];
      expect(events.filter((e) => e.type === 'SIGNAL_RECEIVED')).toHaveLength(1);
      expect(events.filter((e) => e.type === 'TASK_COMPLETED')).toHaveLength(1);
      expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
      expect((await receipts(a)).filter((r) => r.payload.delivery_id === 'pg-ci-1')).toHaveLength(1);
    } finally {
      for (const s of servers) await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
