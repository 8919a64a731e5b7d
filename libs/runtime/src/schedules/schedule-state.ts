import { EventPayload, RuntimeEvent, ScheduleSpec } from '@runledger/contracts';
import { dueSlots, nextSlot, parseCron } from './cron';

/** Every schedule event is in this stream: the schedules are a fold of it. */
export const SCHEDULES_STREAM = 'system:schedules';

export interface ScheduleState {
  schedule_id: string;
  spec: ScheduleSpec;
  created_at: string;
  paused: boolean;
  deleted: boolean;
  /** the latest slot decided (started, skipped, buffered or missed); null: none yet */
  last_slot: string | null;
  last_outcome: EventPayload<'SCHEDULE_FIRED'>['outcome'] | null;
  /** the task of the latest started slot */
  last_task_id: string | null;
  /** a slot buffered behind a running task (overlap buffer_one), not started yet */
  buffered: string | null;
  /** tasks started */
  started: number;
  /** started slots, newest last (the latest few: a restart submits a task a crash left unsubmitted) */
  recent_started: Array<{ slot: string; task_id: string }>;
}

type Fired = EventPayload<'SCHEDULE_FIRED'>;

const RECENT = 5;

/** evolve: one event of the schedules stream into the schedules (a new map entry object; pure but for the map). */
export function evolveSchedules(states: Map<string, ScheduleState>, e: RuntimeEvent): void {
  switch (e.type) {
    case 'SCHEDULE_CREATED':
      states.set(e.payload.schedule_id, {
        schedule_id: e.payload.schedule_id,
        spec: e.payload.spec,
        created_at: e.created_at,
        paused: false,
        deleted: false,
        last_slot: null,
        last_outcome: null,
        last_task_id: null,
        buffered: null,
        started: 0,
        recent_started: [],
      });
      return;
    case 'SCHEDULE_PAUSED':
    case 'SCHEDULE_RESUMED':
    case 'SCHEDULE_DELETED': {
      const s = states.get(e.payload.schedule_id);
      if (!s) return;
      if (e.type === 'SCHEDULE_DELETED') s.deleted = true;
      else s.paused = e.type === 'SCHEDULE_PAUSED';
      return;
    }
    case 'SCHEDULE_FIRED': {
      const s = states.get(e.payload.schedule_id);
      if (!s) return;
      const f = e.payload;
      if (f.outcome === 'buffered') s.buffered = f.slot;
      if (f.outcome === 'started' && f.task_id) {
        if (s.buffered === f.slot) s.buffered = null;
        s.started++;
        s.last_task_id = f.task_id;
        s.recent_started = [...s.recent_started, { slot: f.slot, task_id: f.task_id }].slice(-RECENT);
      }
      if (s.last_slot === null || Date.parse(f.slot) >= Date.parse(s.last_slot)) {
        s.last_slot = f.slot;
        s.last_outcome = f.outcome;
      }
      return;
    }
    default:
      return;
  }
}

/** The idempotency key of a slot's task: the same slot names the same task on every instance, after any restart. */
export const slotKey = (scheduleId: string, slot: string): string => `schedule:${scheduleId}:${slot}`;

/** The slot after now, null when the schedule runs no more (paused or deleted: its own next slot still). */
export function nextSlotOf(s: ScheduleState, nowMs: number): string | null {
  const next = nextSlot(parseCron(s.spec.cron), s.spec.time_zone, nowMs);
  return next === null ? null : new Date(next).toISOString();
}

/**
 * How late a slot may be decided and still count as on time: half the time to the slot after it,
 * between 1.5 s and 60 s. A later one (or several due at once) is a catch-up after downtime.
 */
export function graceMs(spec: ScheduleSpec, slotMs: number): number {
  const after = nextSlot(parseCron(spec.cron), spec.time_zone, slotMs);
  const half = after === null ? 60_000 : (after - slotMs) / 2;
  return Math.max(1_500, Math.min(60_000, half));
}

/**
 * decide: what the schedule records now (pure). `previousRunning`: its latest started task has not
 * ended. A buffered slot starts once that task ended; then the latest due slot (if any) follows the
 * overlap policy, or the catch-up policy when it is late or several slots passed unseen.
 */
export function decideFirings(
  s: ScheduleState,
  nowMs: number,
  previousRunning: boolean,
  taskIdOf: (slot: string) => string,
): Fired[] {
  if (s.paused || s.deleted) return [];
  const out: Fired[] = [];
  let running = previousRunning;
  let buffered = s.buffered;
  if (buffered !== null && !running) {
    out.push({
      schedule_id: s.schedule_id,
      slot: buffered,
      outcome: 'started',
      task_id: taskIdOf(buffered),
      missed: 0,
    });
    running = true;
    buffered = null;
  }
  const after = Date.parse(s.last_slot ?? s.created_at);
  const { slots, total } = dueSlots(parseCron(s.spec.cron), s.spec.time_zone, after, nowMs, 1);
  if (total === 0) return out;
  const latest = slots[slots.length - 1];
  const slot = new Date(latest).toISOString();
  const late = total > 1 || nowMs - latest > graceMs(s.spec, latest);
  if (late && s.spec.catch_up === 'skip') {
    out.push({ schedule_id: s.schedule_id, slot, outcome: 'missed', task_id: null, missed: total });
    return out;
  }
  const missed = late ? total - 1 : 0;
  if (!running || s.spec.overlap === 'allow')
    out.push({ schedule_id: s.schedule_id, slot, outcome: 'started', task_id: taskIdOf(slot), missed });
  else if (s.spec.overlap === 'buffer_one' && buffered === null)
    out.push({ schedule_id: s.schedule_id, slot, outcome: 'buffered', task_id: null, missed });
  else out.push({ schedule_id: s.schedule_id, slot, outcome: 'skipped', task_id: null, missed });
  return out;
}

/** A slot's task input: `{{slot}}`, `{{date}}`, `{{time}}` (in the schedule's zone) and `{{schedule_id}}` filled in. */
export function slotInput(spec: ScheduleSpec, scheduleId: string, slot: string, wallMs: number): string {
  const wall = new Date(wallMs).toISOString();
  const values: Record<string, string> = {
    slot,
    date: wall.slice(0, 10),
    time: wall.slice(11, 19),
    schedule_id: scheduleId,
  };
  return spec.input.replace(/\{\{\s*(slot|date|time|schedule_id)\s*\}\}/g, (_, k: string) => values[k]);
}
