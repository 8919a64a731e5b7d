import { GroupCommitter, GroupResult } from './group-committer';

/** A fake adapter: records each group and answers per request (odd numbers fail alone). */
function recorder(fail?: Error) {
  const groups: number[][] = [];
  const commit = async (requests: readonly number[]): Promise<GroupResult<string>[]> => {
    groups.push([...requests]);
    await new Promise((r) => setTimeout(r, 5));
    if (fail) throw fail;
    return requests.map((n) =>
      n % 2 ? { ok: false, error: new Error(`odd ${n}`) } : { ok: true, value: `ok ${n}` },
    );
  };
  return { groups, commit };
}

describe('GroupCommitter', () => {
  it('commits what is submitted in one tick as one group; each caller gets its own result', async () => {
    const { groups, commit } = recorder();
    const sut = new GroupCommitter(commit);
    const settled = await Promise.allSettled([0, 1, 2, 3].map((n) => sut.submit(n)));
    expect(groups).toEqual([[0, 1, 2, 3]]);
    expect(settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message))).toEqual([
      'ok 0',
      'odd 1',
      'ok 2',
      'odd 3',
    ]);
  });

  it('gathers what arrives while a group commits into the next group, one transaction at a time', async () => {
    const { groups, commit } = recorder();
    const sut = new GroupCommitter(commit);
    const first = sut.submit(0);
    await new Promise((r) => setImmediate(r));
    const later = [2, 4, 6].map((n) => sut.submit(n));
    await Promise.all([first, ...later]);
    expect(groups).toEqual([[0], [2, 4, 6]]);
  });

  it("the next group starts as the one in flight settles, before that group's callers resume", async () => {
    const started: Array<{ requests: number[]; callersDone: number }> = [];
    let callersDone = 0;
    const sut = new GroupCommitter(async (requests: readonly number[]) => {
      started.push({ requests: [...requests], callersDone });
      await new Promise((r) => setTimeout(r, 5));
      return requests.map((n) => ({ ok: true as const, value: n }));
    });
    const first = sut.submit(0).then(() => callersDone++);
    await new Promise((r) => setImmediate(r));
    const second = sut.submit(2).then(() => callersDone++);
    await Promise.all([first, second]);
    // the second group was handed over while the first one's caller had not resumed yet
    expect(started).toEqual([
      { requests: [0], callersDone: 0 },
      { requests: [2], callersDone: 0 },
    ]);
  });

  it('maxBatch splits a burst; a failed transaction rejects every request of its group', async () => {
    const bounded = recorder();
    const sut = new GroupCommitter(bounded.commit, { maxBatch: 2 });
    await Promise.all([0, 2, 4, 6, 8].map((n) => sut.submit(n)));
    expect(bounded.groups).toEqual([[0, 2], [4, 6], [8]]);

    const broken = new GroupCommitter(recorder(new Error('disk full')).commit);
    const settled = await Promise.allSettled([0, 2].map((n) => broken.submit(n)));
    expect(settled.map((s) => s.status === 'rejected' && (s.reason as Error).message)).toEqual([
      'disk full',
      'disk full',
    ]);
  });

  it('drain waits for everything submitted', async () => {
    const { commit } = recorder();
    const sut = new GroupCommitter(commit, { windowMs: 20 });
    let done = 0;
    for (const n of [0, 2]) void sut.submit(n).then(() => done++);
    await sut.drain();
    expect(done).toBe(2);
  });

  it('a rider starts no group: it joins the next one, in order, or commits alone after rideMaxWaitMs', async () => {
    const { groups, commit } = recorder();
    const sut = new GroupCommitter(commit, { rideMaxWaitMs: 1_000 });
    const rider = sut.submit(10, { ride: true });
    await new Promise((r) => setTimeout(r, 20));
    expect(groups).toEqual([]);
    await Promise.all([rider, sut.submit(0), sut.submit(2)]);
    expect(groups).toEqual([[10, 0, 2]]);

    const prompt = new GroupCommitter(recorder().commit, { rideMaxWaitMs: 15 });
    const started = performance.now();
    await expect(prompt.submit(4, { ride: true })).resolves.toBe('ok 4');
    expect(performance.now() - started).toBeGreaterThanOrEqual(14);
  });

  it('a rider submitted while a group commits waits for the next eager request, not the commit; drain takes it', async () => {
    const { groups, commit } = recorder();
    const sut = new GroupCommitter(commit, { rideMaxWaitMs: 60_000 });
    const first = sut.submit(0);
    await new Promise((r) => setImmediate(r));
    const rider = sut.submit(12, { ride: true });
    await first;
    await new Promise((r) => setTimeout(r, 20));
    expect(groups).toEqual([[0]]);
    await sut.drain();
    await expect(rider).resolves.toBe('ok 12');
    expect(groups).toEqual([[0], [12]]);
  });

  it('refuses a negative rideMaxWaitMs', () => {
    expect(() => new GroupCommitter(recorder().commit, { rideMaxWaitMs: -1 })).toThrow(RangeError);
  });
});
