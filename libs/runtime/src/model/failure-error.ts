import { RunledgerError, StopReason } from '@runledger/contracts';

/** The kinds of failure (see failure-policy.ts for what each one is and what is done about it). */
export const FAILURE_KINDS = [
  'validation_error',
  'provider_error',
  'rate_limited',
  'timeout',
  'authentication_error',
  'tool_error',
  'budget_exceeded',
  'cancelled',
] as const satisfies readonly StopReason[];
export type FailureKind = (typeof FAILURE_KINDS)[number];

/** An error that already knows its kind; adapters and guards throw this. */
export class FailureError extends RunledgerError {
  readonly code: FailureKind;
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly retryAfterMs: number | null = null,
    details: unknown = null,
  ) {
    super(message, details);
    this.code = kind;
  }
}
