import {
  ConcurrencyError,
  EventType,
  IdempotencyConflictError,
  IllegalStateError,
  LeaseLostError,
  NewEvent,
  RuntimeEvent,
  ValidationError,
  currentSchemaVersion,
  isFinalEventType,
  newId,
  parseEventBody,
} from '@runledger/contracts';
import { ExpectedSequence, LeaseToken } from './event-store';
import { EventRow, rowToEvent } from './sqlite/rows';

/** An event whose type and payload passed the catalogue, envelope fields not yet assigned. */
export interface ValidatedEvent {
  event_id: string;
  /** the caller chose the id, so it may already be stored; a fresh one cannot be */
  id_supplied: boolean;
  type: EventType;
  payload: unknown;
  session_id: string | undefined;
  causation_id: string | null;
  correlation_id: string | undefined;
  created_at: string | undefined;
}

/** What an adapter knows about a stream inside its append transaction. */
export interface StreamHead {
  /** last sequence, 0 for a missing stream */
  version: number;
  /** type of the event at `version`, null for a missing stream */
  last_type?: string | null;
  /** session of the stream's first event, null for a missing stream */
  session_id: string | null;
}

/** An event ready to insert: everything but the position, which the store assigns. */
export type UnpositionedEvent = Omit<RuntimeEvent, 'position'>;

const MAX_ID = 200;

const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkId(name: string, value: unknown): void {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_ID) {
    throw new ValidationError(`${name} must be a non-empty string of at most ${MAX_ID} characters`, {
      field: name,
    });
  }
  // ids are stored as text columns: PostgreSQL refuses NUL there, and a lone surrogate cannot be encoded
  if (value.includes('\u0000') || UNPAIRED_SURROGATE.test(value))
    throw new ValidationError(`${name} must not contain NUL or unpaired surrogate characters`, {
      field: name,
    });
}

/**
 * One event's own checks against the catalogue (its payload parsed, defaults filled) and of the ids
 * and time its caller gave; its id is assigned here when it has none. The batch's checks are
 * validateBatch's.
 */
export function checkNewEvent(e: NewEvent, i = 0): ValidatedEvent {
  const body = parseEventBody({ type: e?.type, payload: e?.payload });
  // a TASK_RECEIVED's session becomes the stream's session column
  if (body.type === 'TASK_RECEIVED')
    checkId(`events[${i}].payload.session_id`, (body.payload as { session_id: unknown }).session_id);
  // an id made here is well formed
  if (e.event_id !== undefined) checkId(`events[${i}].event_id`, e.event_id);
  const eventId = e.event_id ?? newId('evt');
  if (e.session_id !== undefined) checkId(`events[${i}].session_id`, e.session_id);
  if (e.correlation_id !== undefined) checkId(`events[${i}].correlation_id`, e.correlation_id);
  if (e.causation_id !== undefined && e.causation_id !== null)
    checkId(`events[${i}].causation_id`, e.causation_id);
  if (e.created_at !== undefined && Number.isNaN(Date.parse(e.created_at))) {
    throw new ValidationError(`events[${i}].created_at is not a timestamp`, { field: 'created_at' });
  }
  return {
    event_id: eventId,
    id_supplied: e.event_id !== undefined,
    type: body.type,
    payload: body.payload,
    session_id: e.session_id,
    causation_id: e.causation_id ?? null,
    correlation_id: e.correlation_id,
    created_at: e.created_at,
  };
}

/** Events their writer checked and folded (see writerChecked): frozen, so a changed one is another object. */
const checkedByWriter = new WeakSet<NewEvent>();

/**
 * `e`, listed (and frozen) as checked and folded by its writer: a writer (TaskWriter) that ran
 * checkNewEvent on what its caller gave, filled in the rest from the log or itself (its id, its
 * session, the time) and folded it. An append of this very object does not check it again
 * (validateBatch), and an inline projection may take the writer's fold of a batch of such events
 * (AppendOptions.folded). A copy of it (a store in front changed it on its way) is checked as any
 * other event and folded by the projection itself.
 */
export function writerChecked(e: NewEvent): NewEvent {
  if (e.event_id === undefined) throw new Error('a checked event carries its id');
  checkedByWriter.add(Object.freeze(e));
  return e;
}

/** Whether every event is one its writer checked and folded (writerChecked). */
export const allWriterChecked = (events: readonly NewEvent[]): boolean =>
  events.every((e) => checkedByWriter.has(e));

/** An event that carries its id, as what the checks make of it, for one already checked. */
export const asChecked = (e: NewEvent): ValidatedEvent => ({
  event_id: e.event_id!,
  id_supplied: true,
  type: e.type,
  payload: e.payload,
  session_id: e.session_id,
  causation_id: e.causation_id ?? null,
  correlation_id: e.correlation_id,
  created_at: e.created_at,
});

/**
 * Validate a whole batch against the catalogue before anything is written:
 * one bad event rejects the batch. Event ids are assigned here so a retry of
 * the same NewEvent objects is not idempotent by accident; callers that want
 * idempotent retries pass their own event_id. An event its writer checked
 * (writerChecked) is not checked again; the batch's checks run for every event.
 */
export function validateBatch(
  taskId: string,
  events: readonly NewEvent[],
  expected: ExpectedSequence,
): ValidatedEvent[] {
  checkId('task_id', taskId);
  validateExpected(expected);
  if (!Array.isArray(events) || events.length === 0)
    throw new ValidationError('append needs at least one event');
  const seen = new Set<string>();
  return events.map((e, i) => {
    const checked = checkedByWriter.has(e) ? asChecked(e) : checkNewEvent(e, i);
    if (i > 0 && isFinalEventType(events[i - 1].type))
      throw new ValidationError(`events[${i}] follows the final event ${events[i - 1].type} of its batch`);
    if (seen.has(checked.event_id))
      throw new ValidationError(`event_id ${checked.event_id} appears twice in one append`, {
        event_id: checked.event_id,
      });
    seen.add(checked.event_id);
    return checked;
  });
}

/** Throws ConcurrencyError unless `expected` holds for a stream at `version`. */
export function checkExpected(taskId: string, expected: ExpectedSequence, version: number): void {
  const ok =
    expected === 'any' ||
    (expected === 'no_stream' && version === 0) ||
    (expected === 'stream_exists' && version > 0) ||
    expected === version;
  if (!ok) throw new ConcurrencyError(taskId, expected, version);
}

/**
 * Fencing, inside the append transaction: an append that carries a lease is
 * written only while that lease (same owner, same epoch) is still the task's
 * current one; a claim by another process bumped the epoch, so the old holder
 * gets LeaseLostError and writes nothing. An append without a lease (a
 * submission, a resolution recorded by an instance that does not own the task)
 * is not fenced. Checked before `checkExpected`: a fenced writer learns that it
 * lost the task, not that the stream moved on (the new owner's appends moved it).
 */
export function checkLeaseHeld(
  taskId: string,
  held: LeaseToken | undefined,
  current: LeaseToken | null,
): void {
  if (held === undefined) return;
  if (current !== null && current.owner === held.owner && current.epoch === held.epoch) return;
  throw new LeaseLostError(
    taskId,
    { owner: held.owner, epoch: held.epoch },
    current && { owner: current.owner, epoch: current.epoch },
  );
}

/**
 * A task's stream ends at its final event (TASK_COMPLETED, TASK_FAILED,
 * TASK_CANCELLED): nothing is appended after it, whoever writes and whatever
 * sequence they expect. Checked after `checkExpected`, so a stale writer
 * still learns about the conflict first.
 */
export function checkOpen(taskId: string, head: StreamHead): void {
  if (head.last_type && isFinalEventType(head.last_type))
    throw new IllegalStateError(
      `task ${taskId} already ended (${head.last_type} at sequence ${head.version}); its stream takes no more events`,
      { task_id: taskId, final_event: head.last_type, sequence: head.version },
    );
}

/** Reject a malformed expected version before the transaction starts. */
export function validateExpected(expected: ExpectedSequence): void {
  if (typeof expected === 'number') {
    if (!Number.isInteger(expected) || expected < 0)
      throw new ValidationError(`expected sequence must be a non-negative integer, got ${expected}`);
  } else if (!['any', 'no_stream', 'stream_exists'].includes(expected)) {
    throw new ValidationError(`unknown expected version ${JSON.stringify(expected)}`);
  }
}

/**
 * Decide an append whose event ids may already be stored: all stored (in this
 * stream) is a retry and returns the originals; some stored is a different
 * batch reusing ids, refused; none stored returns null (a normal append).
 */
export function resolveDuplicates(
  taskId: string,
  batch: readonly ValidatedEvent[],
  stored: readonly (Pick<RuntimeEvent, 'event_id' | 'task_id' | 'position'> | undefined)[],
): 'new' | 'retry' {
  const found = stored.filter((s) => s !== undefined);
  if (found.length === 0) return 'new';
  if (found.length === batch.length && found.every((s) => s.task_id === taskId)) return 'retry';
  throw new IdempotencyConflictError(
    `event ids already stored under another append: ${found.map((s) => s.event_id).join(', ')}`,
    {
      event_ids: found.map((s) => s.event_id),
    },
  );
}

/**
 * Fill the envelopes: gap-free sequences after the stream head, session from
 * the event, else the stream's first event, else a TASK_RECEIVED payload, else
 * the task id; correlation defaults to the task id.
 */
export function buildEnvelopes(
  taskId: string,
  batch: readonly ValidatedEvent[],
  head: StreamHead,
  now: string,
): UnpositionedEvent[] {
  let streamSession = head.session_id;
  return batch.map((e, i) => {
    const fromPayload =
      e.type === 'TASK_RECEIVED' ? (e.payload as { session_id: string }).session_id : undefined;
    const session = e.session_id ?? streamSession ?? fromPayload ?? taskId;
    streamSession ??= session;
    return {
      event_id: e.event_id,
      task_id: taskId,
      session_id: session,
      sequence: head.version + i + 1,
      type: e.type,
      payload: e.payload,
      causation_id: e.causation_id,
      correlation_id: e.correlation_id ?? taskId,
      created_at: e.created_at ?? now,
      schema_version: currentSchemaVersion(e.type),
    } as UnpositionedEvent;
  });
}

/**
 * A stored event: its envelope (buildEnvelopes) and the position it was given, keys in the order
 * `{ ...e, position }` gives. Written out, since spreading an object into a literal with one more
 * key takes V8's slow path, once per event an append writes.
 */
export const positioned = (e: UnpositionedEvent, position: number): RuntimeEvent =>
  ({
    event_id: e.event_id,
    task_id: e.task_id,
    session_id: e.session_id,
    sequence: e.sequence,
    type: e.type,
    payload: e.payload,
    causation_id: e.causation_id,
    correlation_id: e.correlation_id,
    created_at: e.created_at,
    schema_version: e.schema_version,
    position,
  }) as RuntimeEvent;

/** What an append comes to once checked: its stored originals (a retry), or the events to write. */
export type AppendDecision =
  | { kind: 'retry'; originals: RuntimeEvent[]; version: number }
  | { kind: 'write'; envelopes: UnpositionedEvent[] };

/**
 * The checks of one append inside its transaction, after fencing, for every
 * adapter: a batch whose supplied ids are all stored is a retry and gets its
 * originals back; otherwise the expected version must hold and the stream be
 * open, and the envelopes follow the head. `storedById` looks up an event id
 * in the log; it is only asked for ids the caller supplied.
 */
export function decideAppend(
  taskId: string,
  batch: readonly ValidatedEvent[],
  expected: ExpectedSequence,
  head: StreamHead,
  storedById: (eventId: string) => EventRow | undefined,
): AppendDecision {
  if (batch.some((e) => e.id_supplied)) {
    const stored = batch.map((e) => (e.id_supplied ? storedById(e.event_id) : undefined));
    if (resolveDuplicates(taskId, batch, stored) === 'retry')
      return { kind: 'retry', originals: (stored as EventRow[]).map(rowToEvent), version: head.version };
  }
  checkExpected(taskId, expected, head.version);
  checkOpen(taskId, head);
  return { kind: 'write', envelopes: buildEnvelopes(taskId, batch, head, new Date().toISOString()) };
}

/** The events table's columns an append inserts (the store assigns `position`), in the order of `eventRowValues`. */
export const EVENT_INSERT_COLUMNS =
  'event_id, task_id, session_id, sequence, type, payload, causation_id, correlation_id, created_at, schema_version';

export type EventRowValues = [
  string,
  string,
  string,
  number,
  string,
  string,
  string | null,
  string,
  string,
  number,
];

const clearPayloadText = (e: UnpositionedEvent): string => JSON.stringify(e.payload);

/**
 * An envelope's values for an INSERT into EVENT_INSERT_COLUMNS, the payload as JSON text: in
 * clear, or as `payloadText` stores it (PayloadSealer).
 */
export const eventRowValues = (
  e: UnpositionedEvent,
  payloadText: (e: UnpositionedEvent) => string = clearPayloadText,
): EventRowValues => [
  e.event_id,
  e.task_id,
  e.session_id,
  e.sequence,
  e.type,
  payloadText(e),
  e.causation_id,
  e.correlation_id,
  e.created_at,
  e.schema_version,
];

/**
 * The database refused an append to an archived task (trigger events_not_archived): the caller gets
 * what it can act on, a restore first. Other errors pass as they are.
 */
export function archivedTaskError(taskId: string, err: unknown): unknown {
  // not instanceof Error: a native driver's errors may come from another realm (jest's module registries)
  const message = (err as { message?: unknown } | null)?.message;
  if (typeof message !== 'string' || !/task is archived/.test(message)) return err;
  return new IllegalStateError(
    `task ${taskId} is archived; its stream takes no events until it is restored (runledger restore ${taskId})`,
    { task_id: taskId, archived: true },
  );
}
