import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { AppendOptions, InMemoryEventStore, LeaseToken } from '@runledger/event-store';
import { InMemoryLeaseStore } from '@runledger/state-store';
import { ScriptedBackend } from '../model/scripted-backend';
import { PermissionService } from '@runledger/permissions';
import {
  AllowAllPolicy,
  RecordingRuntimeLogger,
  RuleTablePolicy,
  TestRuntime,
  startTestRuntime,
  testToolRegistry,
} from '../testing';
import { useTempStore } from '../testing/temp-store';

const respond = (content: string) => JSON.stringify({ type: 'respond', content });
const appendLine = (line: string, delay_ms: number) =>
  JSON.stringify({ type: 'tool', tool: 'append_line', args: { path: 'out.txt', line, delay_ms } });

describe('task ownership: leases held by the runtime that runs a task', () => {
  const temp = useTempStore('rl-ownership-', () => Promise.all(started.map((r) => r.close())));
  let started: TestRuntime[] = [];
  let leases: InMemoryLeaseStore;
  let store: InMemoryEventStore;
  /** every append with the lease it carried */
  let appends: Array<{ taskId: string; types: string[]; lease: LeaseToken | undefined }>;

  beforeEach(() => {
    started = [];
    appends = [];
    leases = new InMemoryLeaseStore();
    store = new InMemoryEventStore(leases);
    const append = store.append.bind(store);
    store.append = (taskId: string, events: readonly NewEvent[], options: AppendOptions) => {
      appends.push({ taskId, types: events.map((e) => e.type), lease: options.lease });
      return append(taskId, events, options);
    };
  });

  /** a runtime process named `owner` on the shared log and leases */
  const runtime = async (
    owner: string,
    orchestrator: string[],
    o: { renewMs?: number; ttlMs?: number; permissions?: PermissionService } = {},
  ) => {
    const logger = new RecordingRuntimeLogger();
    const r = await startTestRuntime({
      store,
      leaseStore: leases,
      leases: { owner, renewMs: o.renewMs ?? 50, ttlMs: o.ttlMs ?? 2_000 },
      tools: testToolRegistry(temp.dir),
      permissions: o.permissions ?? new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator }),
      logger,
    });
    started.push(r);
    return { sut: r.runtime, logger, close: () => r.close() };
  };
  const log = (taskId: string): Promise<RuntimeEvent[]> => store.readWholeStream(taskId);
  const until = async (what: string, holds: () => Promise<boolean> | boolean) => {
    for (let i = 0; i < 400; i++) {
      if (await holds()) return;
      await sleep(10);
    }
    throw new Error(`never happened: ${what}`);
  };
  const lines = () => readFileSync(join(temp.dir, 'out.txt'), 'utf8').trim().split('\n');

  it('claims a submitted task, appends every event of its run under that lease and releases it at the end', async () => {
    const { sut } = await runtime('proc-a', [appendLine('one', 0), respond('done')]);
    const { task_id } = await sut.submit({ input: 'write one line' }, { source: 'api' });
    expect((await sut.settled(task_id)).final?.stop_reason).toBe('completed');
    const [received, ...run] = appends.filter((a) => a.taskId === task_id);
    expect(received).toMatchObject({ types: ['TASK_RECEIVED'], lease: undefined });
    expect(run.length).toBeGreaterThan(3);
    for (const a of run) expect(a.lease).toEqual({ owner: 'proc-a', epoch: 1 });
    expect(await leases.get(task_id)).toBeNull();
    expect(await leases.claimable([task_id])).toEqual([task_id]);
  });

  it('the heartbeat keeps a lease alive for as long as the task runs, far past its TTL', async () => {
    const { sut } = await runtime('proc-a', [appendLine('one', 1_000), respond('done')], {
      renewMs: 50,
      ttlMs: 300,
    });
    const { task_id } = await sut.submit({ input: 'slow line' }, { source: 'api' });
    await until('the tool runs', async () => (await log(task_id)).some((e) => e.type === 'TOOL_CALLED'));
    for (let i = 0; i < 6; i++) {
      await sleep(120);
      expect(await leases.claimable([task_id])).toEqual([]);
    }
    expect((await sut.settled(task_id)).final?.stop_reason).toBe('completed');
    expect(appends.filter((a) => a.lease).every((a) => a.lease!.epoch === 1)).toBe(true);
    expect(lines()).toEqual(['one']);
  });

  it('never resumes a task a live owner holds; takes it over once that lease expired, under a new epoch', async () => {
    const { sut: first } = await runtime('proc-a', [appendLine('one', 60_000)]);
    const { task_id } = await first.submit({ input: 'slow line' }, { source: 'api' });
    await until('the tool runs', async () => (await log(task_id)).some((e) => e.type === 'TOOL_CALLED'));
    const before = (await log(task_id)).length;

    const { sut: second } = await runtime('proc-b', [respond('taken over')]);
    expect(await second.resumeUnfinished()).toEqual([]);
    expect(await second.resumeUnfinished()).toEqual([]);
    expect(await log(task_id)).toHaveLength(before);
    expect(appends.some((a) => a.lease?.owner === 'proc-b')).toBe(false);

    // proc-a "dies": its heartbeat stops (nothing releases the lease), and the lease runs out
    const held = (await leases.get(task_id))!;
    jest
      .spyOn(leases, 'renew')
      .mockImplementation(async (owner, h, ttl) =>
        owner === 'proc-a' ? [] : InMemoryLeaseStore.prototype.renew.call(leases, owner, h, ttl),
      );
    await until('the lease expired', async () => (await leases.claimable([task_id])).length === 1);
    expect(await second.resumeUnfinished()).toEqual([task_id]);
    // the call proc-a had in flight is not run again: its outcome is unknown, and the task ends on it
    expect((await second.settled(task_id)).final).not.toBeNull();
    const takeover = appends.findIndex((a) => a.lease?.owner === 'proc-b');
    expect(appends.slice(takeover).filter((a) => a.lease?.owner === 'proc-a')).toEqual([]);
    expect(appends[takeover]).toMatchObject({
      types: ['GUARD_TRIGGERED'],
      lease: { owner: 'proc-b', epoch: held.epoch + 1 },
    });
    const events = await log(task_id);
    expect(events.filter((e) => e.type === 'TOOL_FAILED')).toEqual([
      expect.objectContaining({ payload: expect.objectContaining({ error_kind: 'outcome_unknown' }) }),
    ]);
  });

  it('resume with force takes a task from a live owner, bumping the epoch, so the old owner is fenced off', async () => {
    await store.append(
      'task_held',
      [{ type: 'TASK_RECEIVED', payload: { input: 'x', session_id: 's' } } as NewEvent],
      {
        expected: 'no_stream',
      },
    );
    const ghost = (await leases.claim('task_held', 'ghost', { ttlMs: 60_000 }))!;
    const { sut } = await runtime('proc-a', [respond('forced')]);
    expect(await sut.resumeUnfinished()).toEqual([]);
    expect(await sut.ownedElsewhere('task_held')).toBe('ghost');
    expect(await sut.resumeUnfinished({ force: true })).toEqual(['task_held']);
    expect((await sut.settled('task_held')).final?.result).toBe('forced');
    await expect(
      store.append(
        'task_held',
        [{ type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index: 0, delta: 'd' } } as NewEvent],
        {
          expected: 'any',
          lease: { owner: 'ghost', epoch: ghost.epoch },
        },
      ),
    ).rejects.toMatchObject({ code: 'lease_lost' });
    expect(appends.find((a) => a.lease?.owner === 'proc-a')?.lease?.epoch).toBe(ghost.epoch + 1);
  });

  it('a lease taken over while a tool runs: the old owner appends nothing more and logs it, no failure recorded', async () => {
    // the heartbeat is slow, so the old owner learns of it from the store refusing its append
    const { sut: first, logger } = await runtime('proc-a', [appendLine('one', 300), respond('never')], {
      renewMs: 60_000,
    });
    const { task_id } = await first.submit({ input: 'slow line' }, { source: 'api' });
    await until('the tool runs', async () => (await log(task_id)).some((e) => e.type === 'TOOL_CALLED'));
    const before = await log(task_id);
    expect(await leases.claim(task_id, 'proc-b', { ttlMs: 60_000, force: true })).toMatchObject({ epoch: 2 });

    const p = await first.settled(task_id);
    expect(p.final).toBeNull();
    expect(await log(task_id)).toEqual(before);
    // the tool call in flight finished its side effect: leases do not undo what already ran
    expect(lines()).toEqual(['one']);
    expect(logger.lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: expect.stringContaining('lease lost'),
        fields: expect.objectContaining({ task_id }),
      }),
    ]);
  });

  it('a heartbeat that finds the lease lost aborts the run at once: the tool is stopped, nothing is appended', async () => {
    const { sut: first, logger } = await runtime('proc-a', [appendLine('one', 60_000)]);
    const { task_id } = await first.submit({ input: 'slow line' }, { source: 'api' });
    await until('the tool runs', async () => (await log(task_id)).some((e) => e.type === 'TOOL_CALLED'));
    const before = await log(task_id);
    await leases.claim(task_id, 'proc-b', { ttlMs: 60_000, force: true });
    await first.settled(task_id);
    expect(await log(task_id)).toEqual(before);
    expect(existsSync(join(temp.dir, 'out.txt'))).toBe(false);
    expect(logger.lines.map((l) => l.msg)).toEqual([expect.stringContaining('lease lost')]);
  });

  it('a waiting task holds no lease: the process that gets the answer claims it and runs it', async () => {
    const script = [JSON.stringify({ type: 'tool', tool: 'echo', args: { text: 'ok?' } }), respond('done')];
    const permissions = new RuleTablePolicy({ echo: 'prompt' });
    const { sut: first } = await runtime('proc-a', script, { permissions });
    const { task_id } = await first.submit({ input: 'ask first' }, { source: 'api' });
    const waiting = await first.settled(task_id);
    expect(waiting.status).toBe('awaiting_permission');
    expect(await leases.get(task_id)).toBeNull();

    const { sut: second } = await runtime('proc-b', script, { permissions });
    await second.resolvePermission(task_id, waiting.pendingPermission!.request_id, 'allow_once');
    expect((await second.settled(task_id)).final?.stop_reason).toBe('completed');
    const answered = appends.findIndex((a) => a.types.includes('PERMISSION_RESOLVED'));
    const resolved = appends[answered];
    // epoch 1 was proc-a's, released when the task began to wait
    expect(resolved?.lease).toEqual({ owner: 'proc-b', epoch: 2 });
    expect(appends.slice(answered).filter((a) => a.lease?.owner !== 'proc-b')).toEqual([]);
  });

  it('an answer to a task a live owner holds is recorded without a lease; the task runs on once someone holds it', async () => {
    const script = [JSON.stringify({ type: 'tool', tool: 'echo', args: { text: 'ok?' } }), respond('done')];
    const permissions = new RuleTablePolicy({ echo: 'prompt' });
    const { sut: first } = await runtime('proc-a', script, { permissions });
    const { task_id } = await first.submit({ input: 'ask first' }, { source: 'api' });
    const waiting = await first.settled(task_id);
    await leases.claim(task_id, 'ghost', { ttlMs: 300 });

    await first.resolvePermission(task_id, waiting.pendingPermission!.request_id, 'allow_once');
    const resolved = appends.find((a) => a.taskId === task_id && a.types.includes('PERMISSION_RESOLVED'));
    expect(resolved?.lease).toBeUndefined();
    expect((await first.settled(task_id)).final).toBeNull();
    // the holder never runs it (it died): once its lease expired, recovery takes the task
    await until('the ghost lease expired', async () => (await leases.claimable([task_id])).length === 1);
    expect(await first.resumeUnfinished()).toEqual([task_id]);
    expect((await first.settled(task_id)).final?.stop_reason).toBe('completed');
  });

  it('a task cancelled through another process stops where it runs, quietly', async () => {
    const { sut: first, logger } = await runtime('proc-a', [appendLine('one', 60_000)]);
    const { task_id } = await first.submit({ input: 'slow line' }, { source: 'api' });
    await until('the tool runs', async () => (await log(task_id)).some((e) => e.type === 'TOOL_CALLED'));
    const { sut: second } = await runtime('proc-b', []);
    await second.cancel(task_id);
    const p = await first.settled(task_id);
    expect(p.final?.stop_reason).toBe('cancelled');
    const events = await log(task_id);
    expect(events[events.length - 1].type).toBe('TASK_CANCELLED');
    expect(existsSync(join(temp.dir, 'out.txt'))).toBe(false);
    expect(logger.lines.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('shutdown releases the leases it holds, so another process resumes the task at once', async () => {
    const { sut: first, close } = await runtime('proc-a', [appendLine('one', 60_000)]);
    const { task_id } = await first.submit({ input: 'slow line' }, { source: 'api' });
    await until('the tool runs', async () => (await log(task_id)).some((e) => e.type === 'TOOL_CALLED'));
    await close();
    expect(await leases.get(task_id)).toBeNull();
    const { sut: second } = await runtime('proc-b', [respond('resumed')]);
    expect(await second.resumeUnfinished()).toEqual([task_id]);
    expect((await second.settled(task_id)).final).not.toBeNull();
    expect(appends.filter((a) => a.taskId === task_id && a.lease?.owner === 'proc-b')[0]).toMatchObject({
      types: ['GUARD_TRIGGERED'],
      lease: { epoch: 2 },
    });
  });
});
