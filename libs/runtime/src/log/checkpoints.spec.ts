import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import { CheckpointStore } from '@runledger/state-store';
import { TaskCheckpoints } from './checkpoints';
import { taskReceivedPayload } from '../discipline/testing-events';
import { foldProgress } from './progress';
import { RecordingRuntimeLogger } from '../testing';

const received = {
  event_id: 'evt_1',
  task_id: 't',
  session_id: 's',
  sequence: 1,
  position: 1,
  type: 'TASK_RECEIVED',
  payload: taskReceivedPayload('x', { session_id: 's' }),
  causation_id: null,
  correlation_id: 't',
  created_at: new Date(0).toISOString(),
} as RuntimeEvent;
const stepDone = (id: string): NewEvent =>
  ({ type: 'STEP_COMPLETED', payload: { plan_id: 'plan_1', step_id: id, output: 'ok' } }) as NewEvent;
const awaiting = { type: 'TASK_AWAITING_PERMISSION', payload: {} } as NewEvent;

describe('TaskCheckpoints.extend', () => {
  const checkpoints = () =>
    new TaskCheckpoints({ store: {} as CheckpointStore, everyEvents: 5 }, new RecordingRuntimeLogger(), [
      received,
    ]);
  const progressAt = (lastSeq: number) => ({ ...foldProgress('t', [received]), last_seq: lastSeq });
  const labels = (batch: readonly NewEvent[]) =>
    batch.flatMap((e) => (e.type === 'CHECKPOINT_SAVED' ? [(e.payload as { label: string }).label] : []));

  it("leaves a step's checkpoint out while the previous one is not committed; a wait's and the every-N one stay", () => {
    const sut = checkpoints();
    // step a's checkpoint lands at sequence 3
    expect(labels(sut.extend(progressAt(1), [stepDone('a')], 1))).toEqual(['step a']);
    // it is not committed yet: step b's would ride in the same commit
    expect(labels(sut.extend(progressAt(3), [stepDone('b')], 1))).toEqual([]);
    // committed now: the next step has one again
    expect(labels(sut.extend(progressAt(4), [stepDone('c')], 3))).toEqual(['step c']);
    // the every-N one bounds what a resume folds, committed or not
    expect(labels(sut.extend(progressAt(10), [stepDone('d')], 3))).toEqual(['5 events']);
    expect(labels(sut.extend(progressAt(12), [awaiting], 3))).toEqual(['awaiting permission']);
  });
});
