import { PermissionDecision } from '@runledger/contracts';
import { InMemoryEventStore } from '@runledger/event-store';
import { AllowAlwaysGrants, PERMISSION_EVENT_TYPES } from './allow-always-grants';

describe('AllowAlwaysGrants (session projection of allow_always)', () => {
  let store: InMemoryEventStore;
  let prompts = 0;

  /** one prompt of `taskId` in `session` for shell_exec under `rule`, answered with `decision` */
  const decide = async (
    taskId: string,
    session: string,
    decision: PermissionDecision,
    rule: string | null = 'tool:shell_exec',
  ) => {
    const request_id = `perm_${++prompts}`;
    await store.append(
      taskId,
      [
        {
          type: 'TASK_AWAITING_PERMISSION',
          session_id: session,
          payload: {
            request_id,
            call_id: 'call_1',
            tool: 'shell_exec',
            args: {},
            args_hash: 'h',
            rule,
            reason: 'r',
          },
        },
        {
          type: 'PERMISSION_RESOLVED',
          session_id: session,
          payload: { request_id, call_id: 'call_1', decision, args_hash: 'h', tool: 'shell_exec' },
        },
      ],
      { expected: 'any' },
    );
  };

  beforeEach(() => {
    store = new InMemoryEventStore();
  });

  it('given an allow_always in the session, then the tool under that rule is allowed in that session only', async () => {
    await decide('task_a', 'ses_1', 'allow_always');
    const sut = new AllowAlwaysGrants(store);
    expect(await sut.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec')).toBe(true);
    expect(await sut.isAllowed('ses_2', 'shell_exec', 'tool:shell_exec')).toBe(false);
    expect(await sut.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec:sudo')).toBe(false);
    expect(await sut.isAllowed('ses_1', 'file_write', 'tool:shell_exec')).toBe(false);
  });

  it('given only allow_once and deny decisions, then nothing is remembered', async () => {
    await decide('task_a', 'ses_1', 'allow_once');
    await decide('task_a', 'ses_1', 'deny');
    expect(await new AllowAlwaysGrants(store).isAllowed('ses_1', 'shell_exec', 'tool:shell_exec')).toBe(
      false,
    );
  });

  it('given a grant under no rule, then it does not stand for a named rule, nor the other way round', async () => {
    await decide('task_a', 'ses_1', 'allow_always', null);
    const sut = new AllowAlwaysGrants(store);
    expect(await sut.isAllowed('ses_1', 'shell_exec', null)).toBe(true);
    expect(await sut.isAllowed('ses_1', 'shell_exec', 'null')).toBe(false);
  });

  it('given a restart, when a new projection is asked, then it folds the grant from the log', async () => {
    const before = new AllowAlwaysGrants(store);
    expect(await before.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec')).toBe(false);
    await decide('task_a', 'ses_1', 'allow_always');
    const afterRestart = new AllowAlwaysGrants(store);
    expect(await afterRestart.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec')).toBe(true);
  });

  it('given a concurrent task of the session grants after a first check, then the next check sees it, reading only the new events', async () => {
    const reads = jest.spyOn(store, 'readAll');
    const sut = new AllowAlwaysGrants(store);
    expect(await sut.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec')).toBe(false);
    await decide('task_a', 'ses_1', 'allow_always');
    const head = (await store.head()).position;
    expect(await sut.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec')).toBe(true);
    expect(await sut.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec')).toBe(true);
    expect(reads.mock.calls.map(([o]) => o)).toEqual([
      { after_position: 0, types: PERMISSION_EVENT_TYPES },
      { after_position: 0, types: PERMISSION_EVENT_TYPES },
      { after_position: head, types: PERMISSION_EVENT_TYPES },
    ]);
  });

  it('given checks that overlap, then each catches up in turn and every event is applied once', async () => {
    await decide('task_a', 'ses_1', 'allow_always');
    const reads = jest.spyOn(store, 'readAll');
    const sut = new AllowAlwaysGrants(store);
    const [one, two] = await Promise.all([
      sut.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec'),
      sut.isAllowed('ses_1', 'shell_exec', 'tool:shell_exec'),
    ]);
    expect([one, two]).toEqual([true, true]);
    const head = (await store.head()).position;
    expect(reads.mock.calls.map(([o]) => o?.after_position)).toEqual([0, head]);
  });
});
