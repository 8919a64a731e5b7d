/**
 * Typed errors shared by every layer. The exception filter maps them to HTTP
 * status codes and WebSocket error replies; nothing else should branch on
 * error messages.
 */
export abstract class RunledgerError extends Error {
  abstract readonly code: string;
  constructor(
    message: string,
    readonly details: unknown = null,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The caller sent something malformed. HTTP 400. */
export class ValidationError extends RunledgerError {
  readonly code = 'validation_error';
}

/** HTTP 404. */
export class NotFoundError extends RunledgerError {
  readonly code = 'not_found';
}

/** Optimistic concurrency failure: the stream moved on. HTTP 409. */
export class ConcurrencyError extends RunledgerError {
  readonly code = 'concurrency_error';
  constructor(
    readonly streamId: string,
    readonly expected: unknown,
    readonly actual: number,
  ) {
    super(`stream ${streamId}: expected ${String(expected)}, actual sequence ${actual}`, {
      stream_id: streamId,
      expected,
      actual,
    });
  }
}

/** The operation is not allowed in the current state (e.g. resolving a request that is not pending). HTTP 409. */
export class IllegalStateError extends RunledgerError {
  readonly code = 'illegal_state';
}

/**
 * Fencing: an append carried a lease that is no longer the task's current one
 * (another process claimed the task, bumping its epoch). The writer must stop
 * working on the task. HTTP 409.
 */
export class LeaseLostError extends RunledgerError {
  readonly code = 'lease_lost';
  constructor(
    readonly taskId: string,
    readonly held: { owner: string; epoch: number },
    readonly current: { owner: string; epoch: number } | null,
  ) {
    super(
      `task ${taskId}: lease epoch ${held.epoch} of ${held.owner} was taken over` +
        (current ? ` (now epoch ${current.epoch}, owner ${current.owner})` : ' (no lease now)'),
      { task_id: taskId, held, current },
    );
  }
}

/** A request reused an idempotency key with a different body. HTTP 409. */
export class IdempotencyConflictError extends RunledgerError {
  readonly code = 'idempotency_conflict';
}

/** A message for a session whose strategy is `reject` while a task of the session is unfinished. HTTP 409. */
export class SessionBusyError extends RunledgerError {
  readonly code = 'session_busy';
}

export class UnauthorizedError extends RunledgerError {
  readonly code = 'unauthorized';
}

export class ForbiddenError extends RunledgerError {
  readonly code = 'forbidden';
}

/** A model did something the protocol does not allow (invalid directive, etc.). */
export class ModelBehaviorError extends RunledgerError {
  readonly code = 'model_behavior_error';
}

/**
 * The process takes no new work for now; `retryAfterSeconds` says when to come back
 * (HTTP: the Retry-After header). Refused before anything is written.
 */
export abstract class BackpressureError extends RunledgerError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
    details: Record<string, unknown>,
  ) {
    super(message, { ...details, retry_after_s: retryAfterSeconds });
  }
}

/** Too many tasks already wait for a run slot. HTTP 429. */
export class QueueFullError extends BackpressureError {
  readonly code = 'queue_full';
}

/** The process is saturated (its event loop lags, or submissions wait on the store). HTTP 503. */
export class OverloadedError extends BackpressureError {
  readonly code = 'overloaded';
}

/** Misconfiguration found at boot. */
export class ConfigError extends RunledgerError {
  readonly code = 'config_error';
}
