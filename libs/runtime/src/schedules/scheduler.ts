import {
  ConcurrencyError,
  NewEvent,
  NotFoundError,
  RuntimeEvent,
  ScheduleSpec,
  ValidationError,
  isFinalEventType,
  newId,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, taskIdForKey } from '../control/runtime-controller';
import { RuntimeLogger } from '../runtime-logger';
import { checkTimeZone, nextSlot, parseCron, wallOf } from './cron';
import {
  SCHEDULES_STREAM,
  ScheduleState,
  decideFirings,
  evolveSchedules,
  nextSlotOf,
  slotInput,
  slotKey,
} from './schedule-state';

/**
 * The longest a scheduler sleeps without a look at its schedules. It wakes at the next due slot and
 * on every commit to the schedules stream (any instance's: the store hands on other writers' commits),
 * so this only bounds what a clock jump could delay.
 */
export const SCHEDULE_IDLE_LOOK_MS = 60_000;
/** how soon a look that failed (the database away) is tried again */
const SCHEDULE_RETRY_MS = 1_000;

/** A schedule as the API shows it. */
export interface ScheduleView extends ScheduleSpec {
  schedule_id: string;
  created_at: string;
  paused: boolean;
  /** the next slot (null: the expression names no more, or the schedule is paused) */
  next_slot: string | null;
  last_slot: string | null;
  last_outcome: ScheduleState['last_outcome'];
  last_task_id: string | null;
  buffered_slot: string | null;
  tasks_started: number;
}

/**
 * Schedules: a fold of the stream `system:schedules` (the log is the truth: every instance rebuilds
 * them from it), and what fires their slots. It looks when the next slot of a schedule comes due, when
 * the schedules stream changes (a schedule created, paused, resumed, deleted or fired, on any
 * instance), when the task a buffered slot waits for ends, and at least every SCHEDULE_IDLE_LOOK_MS;
 * an idle server reads nothing in between. A look (tick) decides each schedule's due slots
 * (decideFirings) and records them with one append expecting the stream's version it read, so of
 * instances deciding together one records and the rest read again; then it submits each started
 * slot's task under the idempotency key `schedule:<id>:<slot>`, so a slot starts one task across
 * instances and restarts (a crash between the record and the task: the next tick submits it).
 */
export class Scheduler {
  private readonly states = new Map<string, ScheduleState>();
  private version = 0;
  /** the wake-up for the next due slot (or the idle look) */
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  /** something changed while a look ran: look again after it */
  private lookAgain = false;
  private detach: (() => void) | null = null;
  /** started slots whose task is known submitted */
  private readonly submitted = new Set<string>();

  constructor(
    private readonly store: EventStore,
    private readonly runtime: RuntimeController,
    private readonly logger: RuntimeLogger,
  ) {}

  start(): void {
    if (this.detach) return;
    this.detach = this.store.onCommitted((events) => {
      if (events.some((e) => e.task_id === SCHEDULES_STREAM || this.waitedFor(e))) this.look();
    });
    this.look();
  }

  async stop(): Promise<void> {
    this.detach?.();
    this.detach = null;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.ticking;
  }

  /** A look now (after the one under way, if any), then asleep until the next due slot. */
  private look(): void {
    if (!this.detach) return;
    if (this.ticking) {
      this.lookAgain = true;
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.ticking = this.tick()
      .then(
        () => this.untilDue(Date.now()),
        (err: unknown) => {
          this.logger.warn({ err }, 'schedule look failed; trying again shortly');
          return SCHEDULE_RETRY_MS;
        },
      )
      .then((sleepMs) => {
        this.ticking = null;
        if (!this.detach) return;
        if (this.lookAgain) {
          this.lookAgain = false;
          return this.look();
        }
        this.timer = setTimeout(() => this.look(), sleepMs);
        this.timer.unref();
      });
  }

  /** How long until the earliest next slot of a running schedule (0: one is due), at most the idle look. */
  private untilDue(nowMs: number): number {
    let sleepMs = SCHEDULE_IDLE_LOOK_MS;
    for (const s of this.states.values()) {
      if (s.paused || s.deleted) continue;
      const next = nextSlot(
        parseCron(s.spec.cron),
        s.spec.time_zone,
        Date.parse(s.last_slot ?? s.created_at),
      );
      // a timer may fire a little early: the slot is looked at once it is surely due
      if (next !== null) sleepMs = Math.min(sleepMs, Math.max(0, next - nowMs + 5));
    }
    return sleepMs;
  }

  /** The end of a task a buffered slot waits for: the slot may start now. */
  private waitedFor(e: RuntimeEvent): boolean {
    if (!isFinalEventType(e.type)) return false;
    for (const s of this.states.values())
      if (s.buffered !== null && s.last_task_id === e.task_id) return true;
    return false;
  }

  /** Reads what the stream gained since the last read. */
  private async refresh(): Promise<void> {
    const events = await this.store.readStream(SCHEDULES_STREAM, { after_seq: this.version });
    for (const e of events) {
      evolveSchedules(this.states, e);
      this.version = e.sequence;
    }
  }

  async create(input: unknown): Promise<ScheduleView> {
    const parsed = ScheduleSpec.safeParse(input);
    if (!parsed.success)
      throw new ValidationError(
        `invalid body: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
        parsed.error.issues,
      );
    const spec = parsed.data;
    checkTimeZone(spec.time_zone);
    if (nextSlot(parseCron(spec.cron), spec.time_zone, Date.now()) === null)
      throw new ValidationError(`cron expression ${JSON.stringify(spec.cron)} names no time that exists`, {
        field: 'cron',
      });
    const schedule_id = newId('sched');
    await this.append([{ type: 'SCHEDULE_CREATED', payload: { schedule_id, spec } }], 'any');
    return this.get(schedule_id);
  }

  async list(): Promise<ScheduleView[]> {
    await this.refresh();
    return [...this.states.values()].filter((s) => !s.deleted).map((s) => this.view(s));
  }

  async get(scheduleId: string): Promise<ScheduleView> {
    return this.view(await this.existing(scheduleId));
  }

  async pause(scheduleId: string, paused: boolean): Promise<ScheduleView> {
    const s = await this.existing(scheduleId);
    if (s.paused !== paused)
      await this.append(
        [{ type: paused ? 'SCHEDULE_PAUSED' : 'SCHEDULE_RESUMED', payload: { schedule_id: scheduleId } }],
        'any',
      );
    return this.get(scheduleId);
  }

  async delete(scheduleId: string): Promise<void> {
    await this.existing(scheduleId);
    await this.append([{ type: 'SCHEDULE_DELETED', payload: { schedule_id: scheduleId } }], 'any');
  }

  private async existing(scheduleId: string): Promise<ScheduleState> {
    await this.refresh();
    const s = this.states.get(scheduleId);
    if (!s || s.deleted)
      throw new NotFoundError(`schedule ${scheduleId} not found`, { schedule_id: scheduleId });
    return s;
  }

  private async append(events: NewEvent[], expected: number | 'any'): Promise<void> {
    await this.store.append(
      SCHEDULES_STREAM,
      events.map((e) => ({ ...e, session_id: SCHEDULES_STREAM })),
      { expected },
    );
    await this.refresh();
  }

  private view(s: ScheduleState): ScheduleView {
    return {
      schedule_id: s.schedule_id,
      ...s.spec,
      created_at: s.created_at,
      paused: s.paused,
      next_slot: s.paused ? null : nextSlotOf(s, Date.now()),
      last_slot: s.last_slot,
      last_outcome: s.last_outcome,
      last_task_id: s.last_task_id,
      buffered_slot: s.buffered,
      tasks_started: s.started,
    };
  }

  /** One look at every schedule: due slots recorded (once, whichever instance), their tasks submitted. */
  async tick(nowMs = Date.now()): Promise<void> {
    await this.refresh();
    const decided: NewEvent[] = [];
    for (const s of this.states.values()) {
      if (s.paused || s.deleted) continue;
      const running = s.last_task_id !== null && !(await this.runtime.progress(s.last_task_id)).final;
      for (const payload of decideFirings(s, nowMs, running, (slot) =>
        taskIdForKey(slotKey(s.schedule_id, slot)),
      ))
        decided.push({ type: 'SCHEDULE_FIRED', payload });
    }
    if (decided.length > 0) {
      try {
        // an empty stream has no version to expect; a schedule is created before anything fires
        await this.append(decided, this.version);
      } catch (err) {
        // another instance decided first: its record stands, this one reads it next tick
        if (!(err instanceof ConcurrencyError)) throw err;
        await this.refresh();
      }
    }
    for (const s of this.states.values())
      for (const started of s.recent_started) await this.submitSlot(s, started.slot, started.task_id);
  }

  /** The slot's task, submitted under its key: recorded once, whoever submits it and however often. */
  private async submitSlot(s: ScheduleState, slot: string, taskId: string): Promise<void> {
    if (this.submitted.has(taskId)) return;
    if (this.submitted.size > 10_000) this.submitted.clear();
    if ((await this.store.streamVersion(taskId)) === 0) {
      const { spec } = s;
      try {
        await this.runtime.submit(
          {
            input: slotInput(spec, s.schedule_id, slot, wallOf(Date.parse(slot), spec.time_zone)),
            ...(spec.session_id ? { session_id: spec.session_id } : {}),
            ...(spec.budgets ? { budgets: spec.budgets } : {}),
          },
          { idempotency_key: slotKey(s.schedule_id, slot), source: 'schedule' },
        );
      } catch (err) {
        // a submission refused (backpressure, a full queue) is tried again at the next tick
        this.logger.warn(
          { err, schedule_id: s.schedule_id, slot },
          'scheduled task not submitted; the next tick tries again',
        );
        return;
      }
    }
    this.submitted.add(taskId);
  }
}
