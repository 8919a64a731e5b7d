import { setImmediate as nextTurn } from 'node:timers/promises';
import { EventType } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';

/**
 * Each page is read in one synchronous statement: small enough pages, with a
 * turn of the event loop between them, keep a sweep after a burst of
 * thousands of submissions from holding up the requests meanwhile.
 */
const PAGE = 250;

/**
 * What moves a task in or out of the set: received, waiting for a person, the client or a timer,
 * answered or fired, ended. A tool outcome matters only to a task waiting for the client.
 */
const TRACKED: readonly EventType[] = [
  'TASK_RECEIVED',
  'TASK_AWAITING_PERMISSION',
  'TASK_AWAITING_SECRET',
  'TASK_AWAITING_CLIENT_TOOL',
  'PERMISSION_RESOLVED',
  'SECRET_PROVIDED',
  'TOOL_COMPLETED',
  'TOOL_FAILED',
  'TIMER_SET',
  'TIMER_FIRED',
  'SIGNAL_RECEIVED',
  'SIGNAL_AWAITED',
  'SIGNAL_DELIVERED',
  'INTERRUPT_REQUESTED',
  'TASK_COMPLETED',
  'TASK_FAILED',
  'TASK_CANCELLED',
];

/**
 * The tasks the log shows received, not ended and not waiting for a person:
 * what crash recovery looks at. The first look reads the whole log (those
 * event types only); every later one reads only what was appended since, so a
 * periodic sweep stays cheap on a long log, and tasks waiting for an answer
 * cost nothing until it comes.
 */
export class UnfinishedTasks {
  private readonly open = new Set<string>();
  private readonly waiting = new Set<string>();
  /** the TIMER_SET each task waiting for a timer waits on, with its due time once read */
  private readonly timers = new Map<string, { sequence: number; due_at: string | null }>();
  /** how many calls to its client's tools each task waits for */
  private readonly clientCalls = new Map<string, number>();
  /** tasks that were sent a signal */
  private readonly signalled = new Set<string>();
  private after = 0;

  constructor(private readonly store: EventStore) {}

  async list(): Promise<string[]> {
    await this.catchUp();
    return [...this.open].filter((taskId) => !this.waiting.has(taskId));
  }

  /** The timers unfinished tasks wait for, with their due times. */
  async pendingTimers(): Promise<Array<{ task_id: string; due_at: string }>> {
    await this.catchUp();
    const due: Array<{ task_id: string; due_at: string }> = [];
    for (const [task_id, timer] of this.timers) {
      // heads carry no payload: each timer's own event is read once, for its due time
      if (timer.due_at === null) {
        const [set] = await this.store.readStream(task_id, { after_seq: timer.sequence - 1, limit: 1 });
        if (set?.type !== 'TIMER_SET') continue;
        timer.due_at = set.payload.due_at;
      }
      due.push({ task_id, due_at: timer.due_at });
    }
    return due;
  }

  private async answersClient(taskId: string, sequence: number): Promise<boolean> {
    const [outcome] = await this.store.readStream(taskId, { after_seq: sequence - 1, limit: 1 });
    return (
      (outcome?.type === 'TOOL_COMPLETED' || outcome?.type === 'TOOL_FAILED') &&
      outcome.payload.request_id !== undefined
    );
  }

  private async catchUp(): Promise<void> {
    for (;;) {
      const page = await this.store.readHeads({ after_position: this.after, limit: PAGE, types: TRACKED });
      for (const e of page) {
        switch (e.type) {
          case 'TASK_RECEIVED':
            this.open.add(e.task_id);
            break;
          case 'TASK_AWAITING_PERMISSION':
          case 'TASK_AWAITING_SECRET':
            this.waiting.add(e.task_id);
            break;
          case 'TASK_AWAITING_CLIENT_TOOL':
            this.waiting.add(e.task_id);
            this.clientCalls.set(e.task_id, (this.clientCalls.get(e.task_id) ?? 0) + 1);
            break;
          case 'TOOL_COMPLETED':
          case 'TOOL_FAILED': {
            const waitingFor = this.clientCalls.get(e.task_id) ?? 0;
            // heads carry no payload: an outcome of a task waiting for its client is read, to see whether it answers it
            if (waitingFor === 0 || !(await this.answersClient(e.task_id, e.sequence))) break;
            if (waitingFor > 1) this.clientCalls.set(e.task_id, waitingFor - 1);
            else {
              this.clientCalls.delete(e.task_id);
              this.waiting.delete(e.task_id);
            }
            break;
          }
          case 'TIMER_SET':
            this.waiting.add(e.task_id);
            this.timers.set(e.task_id, { sequence: e.sequence, due_at: null });
            break;
          case 'PERMISSION_RESOLVED':
          case 'SECRET_PROVIDED':
            // still waiting while calls to the client's tools are out
            if (!this.clientCalls.has(e.task_id)) this.waiting.delete(e.task_id);
            break;
          case 'TIMER_FIRED':
          case 'SIGNAL_DELIVERED':
            this.waiting.delete(e.task_id);
            this.timers.delete(e.task_id);
            break;
          // a task sent signals is looked at by every sweep while it waits: a signal and its wait may
          // have crossed, leaving one to deliver (see RuntimeController.deliverKeptSignal)
          case 'SIGNAL_RECEIVED':
            this.signalled.add(e.task_id);
            this.waiting.delete(e.task_id);
            break;
          case 'SIGNAL_AWAITED':
            if (!this.signalled.has(e.task_id)) this.waiting.add(e.task_id);
            break;
          // an interrupted task is run to its end, whatever it waited for
          case 'INTERRUPT_REQUESTED':
            this.waiting.delete(e.task_id);
            break;
          default:
            this.open.delete(e.task_id);
            this.waiting.delete(e.task_id);
            this.timers.delete(e.task_id);
            this.clientCalls.delete(e.task_id);
            this.signalled.delete(e.task_id);
        }
      }
      if (page.length > 0) this.after = page[page.length - 1].position;
      if (page.length < PAGE) return;
      await nextTurn();
    }
  }
}
