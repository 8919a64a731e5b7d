import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NewEvent, emptyUsage } from '@runledger/contracts';
import { SqliteStorage, createSqliteStorage, foldTaskState } from '@runledger/state-store';
import { RedactingEventStore } from './redacting-event-store';
import { SessionSecrets } from './session-secrets';
import { TaskWriter } from './task-writer';

const received = {
  type: 'TASK_RECEIVED',
  payload: { input: 'find the key', session_id: 'ses_1' },
} as NewEvent;
const chunk = (index: number, delta: string) =>
  ({ type: 'OUTPUT_CHUNK', payload: { call_id: 'c', index, delta } }) as NewEvent;
const completed = (result: string) =>
  ({
    type: 'TASK_COMPLETED',
    payload: { stop_reason: 'completed', detail: 'ok', usage: emptyUsage(), result },
  }) as NewEvent;

for (const writerThread of [false, true])
  describe(`a TaskWriter's appends and the tasks rows (SQLite, ${writerThread ? 'writer thread' : 'inline'})`, () => {
    let dir: string;
    let storage: SqliteStorage;
    beforeEach(async () => {
      dir = mkdtempSync(join(tmpdir(), 'runledger-writer-fold-'));
      storage = await createSqliteStorage({ path: join(dir, 'r.db'), synchronous: 'NORMAL', writerThread });
      await storage.eventStore.ready?.();
    });
    afterEach(async () => {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("the row after each commit is the fold of the log, and the writer's state is too; a rebuild changes nothing", async () => {
      const sut = await TaskWriter.open(storage.eventStore, 't1');
      await sut.append([received]);
      sut.defer([chunk(0, 'a'), chunk(1, 'b')]);
      await sut.append([chunk(2, 'c')]);
      const log = () => storage.eventStore.readStream('t1');
      expect(await storage.taskStates.get('t1')).toEqual(foldTaskState(await log()));
      expect(sut.fold.state).toEqual(foldTaskState(await log()));
      // another writer's append in between: the next append's fold begins where the row no longer is
      await storage.eventStore.append('t1', [chunk(3, 'elsewhere')], { expected: 4 });
      await sut.append([completed('the key is under the mat')]);
      expect(await storage.taskStates.get('t1')).toEqual(foldTaskState(await log()));
      expect(await storage.taskStates.get('t1')).toMatchObject({ status: 'completed', last_seq: 6 });
      expect(sut.fold.state).toEqual(foldTaskState(await log()));
      expect((await storage.taskStates.rebuildReport()).changed).toEqual([]);
    });

    it('a secret the session learns after an event was handed over reaches neither the log nor the row', async () => {
      const secrets = new SessionSecrets(randomBytes(32));
      const store = new RedactingEventStore(storage.eventStore, secrets);
      const sut = await TaskWriter.open(store, 't1');
      await sut.append([received]);
      // handed over (and folded) before the secret is known; the store in front redacts it on its way in
      const done = sut.append([completed('the password is hunter2-the-secret')]);
      secrets.remember('ses_1', 'hunter2-the-secret');
      await done;
      const row = await storage.taskStates.get('t1');
      expect(row).toMatchObject({ status: 'completed' });
      expect(JSON.stringify(row)).not.toContain('hunter2-the-secret');
      expect(JSON.stringify(await storage.eventStore.readStream('t1'))).not.toContain('hunter2-the-secret');
      expect(row).toEqual(foldTaskState(await storage.eventStore.readStream('t1')));
      expect(sut.fold.state).toEqual(row);
    });
  });
