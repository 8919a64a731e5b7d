import { ModelBackend } from '@runledger/runtime';
import { GatedBackend } from '@runledger/testing';
import { ApiHarness, bootApi, waitForTask } from './api-harness';

describe('POST /tasks under backpressure', () => {
  let h: ApiHarness;
  let model: GatedBackend;

  beforeEach(async () => {
    model = new GatedBackend('finished');
    // one run slot and room for one more task: the third submission finds the queue full
    h = await bootApi(
      { RUNLEDGER_CONCURRENCY: '1', RUNLEDGER_QUEUE_MAX: '1' },
      { overrides: [[ModelBackend, model]], checkResponses: true },
    );
  });

  afterEach(async () => {
    model.release();
    await h.close();
  });

  it('answers 202 while a task runs and one waits, then 429 with Retry-After and writes nothing; takes tasks again once the queue drains', async () => {
    const running = await h.request('POST', '/tasks', { body: { input: 'first' } });
    const queued = await h.request('POST', '/tasks', { body: { input: 'second' } });
    expect([running.status, queued.status]).toEqual([202, 202]);
    expect(queued.body).toEqual({ task_id: expect.any(String), status: 'queued' });

    const refused = await h.request('POST', '/tasks', {
      body: { input: 'third' },
      headers: { 'idempotency-key': 'third-try' },
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.body).toEqual({
      error: 'queue_full',
      message: expect.stringMatching(/1 tasks already wait to run \(at most 1\)/),
      details: { queued: 1, max_queued: 1, retry_after_s: 1 },
    });
    const listed = await h.request('GET', '/tasks?limit=10');
    expect(listed.body.tasks.map((t: { task_id: string }) => t.task_id).sort()).toEqual(
      [running.body.task_id, queued.body.task_id].sort(),
    );

    model.release();
    for (const id of [running.body.task_id, queued.body.task_id])
      expect((await waitForTask(h, id)).status).toBe('completed');
    const retried = await h.request('POST', '/tasks', {
      body: { input: 'third' },
      headers: { 'idempotency-key': 'third-try' },
    });
    expect(retried.status).toBe(202);
    expect((await waitForTask(h, retried.body.task_id)).result).toBe('finished');
    expect(h.responseMismatches).toEqual([]);
  });
});

describe('POST /tasks bursts at the default limits', () => {
  let h: ApiHarness;
  let model: GatedBackend;

  beforeEach(async () => {
    model = new GatedBackend('finished');
    // the shipped loop limits, which the harness otherwise turns off
    h = await bootApi(
      {
        RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: '250',
        RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '0.9',
        RUNLEDGER_TASK_START_LOOP_UTILIZATION: '0.5',
      },
      { overrides: [[ModelBackend, model]], checkResponses: true },
    );
  });

  afterEach(async () => {
    model.release();
    await h.close();
  });

  it('accepts back-to-back bursts of 50 concurrent submissions, and answers 50 identical ones with one Idempotency-Key', async () => {
    for (let burst = 0; burst < 3; burst++) {
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          h.request('POST', '/tasks', { body: { input: `burst ${burst}, task ${i}` } }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(50).fill(202));
    }
    const keyed = await Promise.all(
      Array.from({ length: 50 }, () =>
        h.request('POST', '/tasks', {
          body: { input: 'the same request' },
          headers: { 'idempotency-key': 'one-key' },
        }),
      ),
    );
    expect(keyed.map((a) => a.status)).toEqual(Array(50).fill(202));
    expect(new Set(keyed.map((a) => a.body.task_id)).size).toBe(1);
    expect(h.responseMismatches).toEqual([]);
  });
});
