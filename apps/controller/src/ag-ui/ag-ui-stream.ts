import { BeforeApplicationShutdown, Inject, Injectable } from '@nestjs/common';
import type { Message } from '@ag-ui/core';
import type { Request, Response } from 'express';
import { RuntimeEvent } from '@runledger/contracts';
import { EventBus, EventStore } from '@runledger/event-store';
import { TaskViews } from '@runledger/runtime';
import { EventSource, Follow, eventSourceOf, followEvents } from '../streaming/follow-events';
import { SseResponse } from '../streaming/sse-response';
import {
  AgUiEmitted,
  AgUiRunFrame,
  AgUiRunState,
  finishParked,
  isAfter,
  isAwaiting,
  mapEvent,
  messagesOfTask,
  openRun,
  parseEventId,
} from './ag-ui-events';

/**
 * How long a waiting task's log must stay still before the run ends on its interrupts: a plan's
 * steps already under way when one of them asks still record their outcomes first.
 */
export const PARKED_SETTLE_MS = 100;

/** How many of a thread's latest tasks a run's MESSAGES_SNAPSHOT reads for the messages before its own. */
export const THREAD_TASKS_READ = 100;

/**
 * Writes one AG-UI run as server-sent events: the task's log read and then followed live
 * (followEvents: no gap, no duplicate at the seam), each log event mapped by the pure mapping of
 * ag-ui-events, each AG-UI event sent with its log-derived id. Events at or before `lastEventId`
 * are mapped but not sent, so a reconnect continues exactly where the client stopped, on any
 * instance. The response ends with the run (RUN_FINISHED or RUN_ERROR).
 */
@Injectable()
export class AgUiStream implements BeforeApplicationShutdown {
  private readonly open = new Set<Follow>();
  private readonly events: EventSource;

  constructor(
    @Inject(EventStore) private readonly store: EventStore,
    @Inject(EventBus) bus: EventBus,
    @Inject(TaskViews) private readonly tasks: TaskViews,
  ) {
    this.events = eventSourceOf(store, bus);
  }

  beforeApplicationShutdown(): void {
    for (const follow of this.open) follow.stop();
  }

  async write(
    frame: AgUiRunFrame,
    lastEventId: string | undefined,
    req: Request,
    res: Response,
  ): Promise<void> {
    const cursor = lastEventId === undefined ? null : parseEventId(lastEventId);
    const before = frame.after > 0 ? await this.store.readStream(frame.taskId, { limit: frame.after }) : [];
    let step = openRun(frame, before, await this.threadBefore(frame));
    const sse = new SseResponse(req, res);
    const send = (out: AgUiEmitted[]) =>
      sse.write(
        out
          .filter((o) => isAfter(o.id, cursor))
          .map((o) => `id: ${o.id}\nevent: ${o.event.type}\ndata: ${JSON.stringify(o.event)}\n\n`)
          .join(''),
      );
    await send(step.out);
    const follow = followEvents(
      this.events,
      { kind: 'task', task_id: frame.taskId, after_seq: frame.after },
      async (raw) => {
        const out: AgUiEmitted[] = [];
        for (const r of raw) {
          step = mapEvent(step.state, JSON.parse(r.json) as RuntimeEvent);
          out.push(...step.out);
          if (step.state.ended) break;
        }
        await send(out);
        if (step.state.ended) return 'stop';
        if (isAwaiting(step.state) && (await this.parked(step.state))) {
          step = finishParked(step.state);
          await send(step.out);
          return 'stop';
        }
        return undefined;
      },
      { onOverflow: sse.abort, onError: sse.abort },
    );
    await sse.serve(follow, this.open);
  }

  /**
   * The messages of the thread's tasks received before the run's task (delegated children aside),
   * each as its log stood when the run's task was received: the same for every run of the task.
   */
  private async threadBefore(frame: AgUiRunFrame): Promise<Message[]> {
    const [received] = await this.store.readStream(frame.taskId, { limit: 1 });
    if (!received) return [];
    const logs: RuntimeEvent[][] = [];
    for (const t of await this.tasks.sessionTasks(received.session_id, THREAD_TASKS_READ)) {
      if (t.task_id === frame.taskId) continue;
      const log = await this.store.readWholeStream(t.task_id);
      const [first] = log;
      if (!first || first.position >= received.position) continue;
      if (first.type === 'TASK_RECEIVED' && first.payload.parent_task_id !== undefined) continue;
      logs.push(log.filter((e) => e.position < received.position));
    }
    logs.sort((a, b) => a[0].position - b[0].position);
    return logs.flatMap((log) => messagesOfTask(frame.threadId, log));
  }

  /** The task waits and its log has held nothing after the run's last event for PARKED_SETTLE_MS. */
  private async parked(state: AgUiRunState): Promise<boolean> {
    await new Promise((resolve) => setTimeout(resolve, PARKED_SETTLE_MS));
    const view = await this.tasks.get(state.frame.taskId);
    return view !== null && view.last_seq === state.seq;
  }
}
