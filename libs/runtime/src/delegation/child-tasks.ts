import {
  AcceptCheck,
  AgentProfile,
  Budgets,
  EventPayload,
  RuntimeEvent,
  emptyUsage,
} from '@runledger/contracts';

/** Everything a child task's TASK_RECEIVED is made of. */
export interface ChildTaskSpec {
  task_id: string;
  /** the parent's delegation it runs for */
  call_id: string;
  session_id: string;
  parent_task_id: string;
  root_task_id: string;
  depth: number;
  agent: AgentProfile;
  input: string;
  budgets: Budgets;
  accept_checks: AcceptCheck[];
}

/** How a child task ended, as its parent records it. */
export type ChildEnd = Omit<EventPayload<'CHILD_TASK_ENDED'>, 'call_id' | 'step_id' | 'child_task_id'>;

/**
 * Where child tasks live: the RuntimeController creates and runs them (the
 * engine is built before it, so the controller attaches itself once built).
 */
export interface ChildTaskHost {
  /** Create the child's stream unless it exists, and have it run (a child waiting for a person stays waiting). */
  startChild(spec: ChildTaskSpec): Promise<void>;
  /** The child's end once its final event is in the log (at once if it already is); null when `signal` aborted first. */
  childEnded(childTaskId: string, signal: AbortSignal): Promise<ChildEnd | null>;
}

/** The host the engine delegates through, attached after the controller is built. */
export class ChildTasks implements ChildTaskHost {
  private host: ChildTaskHost | null = null;

  attach(host: ChildTaskHost): void {
    this.host = host;
  }

  startChild(spec: ChildTaskSpec): Promise<void> {
    return this.attached().startChild(spec);
  }

  childEnded(childTaskId: string, signal: AbortSignal): Promise<ChildEnd | null> {
    return this.attached().childEnded(childTaskId, signal);
  }

  private attached(): ChildTaskHost {
    if (!this.host) throw new Error('no runtime controller attached to run child tasks');
    return this.host;
  }
}

/**
 * Child tasks as a recording saw them end, for a replay: nothing runs; each
 * delegation gets the end its recorded CHILD_TASK_ENDED names (by call), or
 * a failure saying the recording has none.
 */
export class RecordedChildTasks implements ChildTaskHost {
  private readonly ends = new Map<string, ChildEnd>();
  private readonly callOf = new Map<string, string>();

  constructor(events: readonly RuntimeEvent[]) {
    for (const e of events)
      if (e.type === 'CHILD_TASK_ENDED') {
        const { call_id, step_id: _step, child_task_id: _child, ...end } = e.payload;
        this.ends.set(call_id, end);
      }
  }

  startChild(spec: ChildTaskSpec): Promise<void> {
    this.callOf.set(spec.task_id, spec.call_id);
    return Promise.resolve();
  }

  childEnded(childTaskId: string): Promise<ChildEnd | null> {
    const call = this.callOf.get(childTaskId);
    const end = call === undefined ? undefined : this.ends.get(call);
    return Promise.resolve(
      end ?? {
        status: 'failed',
        stop_reason: 'validation_error',
        detail: `the recording has no end for the child of delegation ${call ?? childTaskId}`,
        result: null,
        usage: emptyUsage(),
      },
    );
  }
}

/** a final event as the end its parent records */
export function endOf(e: RuntimeEvent): ChildEnd {
  switch (e.type) {
    case 'TASK_COMPLETED':
      return { status: 'completed', ...pick(e.payload), result: e.payload.result };
    case 'TASK_FAILED':
      return { status: 'failed', ...pick(e.payload), result: e.payload.result };
    case 'TASK_CANCELLED':
      return { status: 'cancelled', ...pick(e.payload), result: null };
    default:
      throw new Error(`${e.type} is not a final event`);
  }
}
const pick = (p: { stop_reason: ChildEnd['stop_reason']; detail: string; usage: ChildEnd['usage'] }) => ({
  stop_reason: p.stop_reason,
  detail: p.detail,
  usage: p.usage,
});
