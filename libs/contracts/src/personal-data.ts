import { IllegalStateError } from './errors';

/**
 * Which parts of an event payload are a person's content, for erasure by crypto-shredding (see
 * docs/retention.md, "Erasure"). The rule is default-deny: every top-level text, object or array
 * field is personal unless its name is in CLEAR_PAYLOAD_FIELDS, the structure a fold, the archive
 * planner, the usage read model or a replay needs to walk a log whose content is gone (ids,
 * statuses, stop reasons, counts, model names, usage). Numbers, booleans and null stay clear.
 * A new field of a new event is therefore sealed until someone decides it is structure.
 */
export const CLEAR_PAYLOAD_FIELDS: ReadonlySet<string> = new Set([
  // ids and references
  'after_task_id',
  'call_id',
  'callback_id',
  'checkpoint_id',
  'child_task_id',
  'context_id',
  'correlation_id',
  'causation_id',
  'delivery_id',
  'entry_id',
  'event_id',
  'forked_from',
  'idempotency_key',
  'message_id',
  'parent_task_id',
  'plan_id',
  'remote_task_id',
  'request_id',
  'root_task_id',
  'schedule_id',
  'segment_id',
  'session_id',
  'source_event_id',
  'step_id',
  'target_event_id',
  'task_id',
  'task_ids',
  'timer_id',
  'todo_id',
  'wait_id',
  // kinds, statuses, reasons from closed lists
  'agent',
  'answer_source',
  'backend',
  'decision',
  'encoding',
  'error_kind',
  'fallback_reason',
  'finish_reason',
  'format',
  'guard',
  'kind',
  'mutation_intent',
  'on_busy',
  'op',
  'owner',
  'role',
  'source',
  'status',
  'stop_reason',
  'tool',
  'type',
  // measures, budgets, times
  'args_hash',
  'alg',
  'budgets',
  'claimed_until',
  'created_at',
  'digest',
  'due_at',
  'embedding_model',
  'fingerprint',
  'model',
  'request_hash',
  'retry_at',
  'session_budget',
  'until',
  'usage',
]);

/** The value an erased field reads as, wherever the event is served. */
export const ERASED_VALUE = '[erased]';

/** The payload key that marks an event whose personal fields were erased (or whose key is missing). */
export const ERASED_KEY = '$erased';

/** The payload key that holds the sealed personal fields of a stored payload. */
export const SEALED_KEY = '$sealed';

/** Why an event's personal fields read as ERASED_VALUE. */
export type ErasedMark = 'erased' | 'key_missing';

/** Streams of the system itself (archive, schedules, memory) belong to no person and are never sealed. */
export const isSystemSession = (sessionId: string): boolean =>
  sessionId === 'system' || sessionId.startsWith('system:');

/** A payload field a person's content lives in (see CLEAR_PAYLOAD_FIELDS). */
export const isPersonalField = (name: string, value: unknown): boolean =>
  value !== null &&
  (typeof value === 'string' || typeof value === 'object') &&
  !CLEAR_PAYLOAD_FIELDS.has(name) &&
  name !== SEALED_KEY &&
  name !== ERASED_KEY;

/** The erasure mark of a payload as served, or null when its content is there. */
export const erasedMarkOf = (payload: unknown): ErasedMark | null => {
  const mark = (payload as Record<string, unknown> | null)?.[ERASED_KEY];
  return mark === 'erased' || mark === 'key_missing' ? mark : null;
};

/**
 * A task whose session or task tree was erased keeps the structure of its log but not its content
 * (model answers, tool outputs, input): re-running it would diverge from what really happened, so
 * it is refused with that said, never run on the erased placeholders.
 */
export function refuseErasedContent(
  taskId: string,
  events: readonly { session_id: string; payload: unknown }[],
  consequence: string,
): void {
  const erased = events.find((e) => erasedMarkOf(e.payload) !== null);
  if (!erased) return;
  const mark = erasedMarkOf(erased.payload);
  throw new IllegalStateError(
    mark === 'erased'
      ? `task ${taskId}'s content was erased (with its session ${erased.session_id} or its task tree): ${consequence}`
      : `task ${taskId}'s content cannot be read (its session's data key is missing): ${consequence}`,
    { task_id: taskId, session_id: erased.session_id, erased: mark },
  );
}
