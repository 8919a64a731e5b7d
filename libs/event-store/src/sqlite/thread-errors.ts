import {
  ConcurrencyError,
  IdempotencyConflictError,
  IllegalStateError,
  LeaseLostError,
  NotFoundError,
  RunledgerError,
  ValidationError,
} from '@runledger/contracts';
import { StoreBusyError } from './append-transaction';

/** An error as it crosses from the writer thread: the fields its class is rebuilt from. */
export interface ThreadError {
  name: string;
  message: string;
  /** RunledgerError.code, or a SQLite error code (SQLITE_BUSY, SQLITE_CONSTRAINT_...) */
  code?: string;
  details?: unknown;
  stack?: string;
}

export function toThreadError(err: unknown): ThreadError {
  if (!(err instanceof Error)) return { name: 'Error', message: String(err) };
  const code = (err as { code?: unknown }).code;
  return {
    name: err.name,
    message: err.message,
    ...(typeof code === 'string' ? { code } : {}),
    ...(err instanceof RunledgerError ? { details: err.details } : {}),
    stack: err.stack,
  };
}

type Details = Record<string, unknown>;

/** The typed errors an append can end in, rebuilt by code so callers' instanceof checks hold across the thread. */
const REBUILD: Record<string, (e: ThreadError) => Error> = {
  concurrency_error: (e) => {
    const d = e.details as Details;
    return new ConcurrencyError(String(d.stream_id), d.expected, Number(d.actual));
  },
  lease_lost: (e) => {
    const d = e.details as {
      task_id: string;
      held: LeaseLostError['held'];
      current: LeaseLostError['current'];
    };
    return new LeaseLostError(d.task_id, d.held, d.current);
  },
  illegal_state: (e) => new IllegalStateError(e.message, e.details),
  idempotency_conflict: (e) => new IdempotencyConflictError(e.message, e.details),
  validation_error: (e) => new ValidationError(e.message, e.details),
  not_found: (e) => new NotFoundError(e.message, e.details),
};

export function fromThreadError(e: ThreadError): Error {
  const rebuild =
    e.name === 'StoreBusyError' ? () => new StoreBusyError(e.message) : e.code ? REBUILD[e.code] : undefined;
  const err = rebuild ? rebuild(e) : Object.assign(new Error(e.message), e.code ? { code: e.code } : {});
  if (!rebuild) (err as { name: string }).name = e.name;
  // the stack that matters is where it was thrown, in the writer thread
  if (e.stack) err.stack = e.stack;
  return err;
}
