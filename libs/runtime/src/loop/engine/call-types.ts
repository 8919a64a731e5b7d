import { NewEvent } from '@runledger/contracts';
import { HardStop, Stop } from '../../ports';

/** One tool call as the engine runs it: a plan step's call or a tool directive's. */
export interface CallSpec {
  call_id: string;
  tool: string;
  args: Record<string, unknown>;
  step_id: string | null;
  requiresConfirmation: boolean;
  /**
   * Events the caller records with the call's final outcome, in the same
   * append (a plan step's STEP_COMPLETED or STEP_FAILED); written alone when
   * the outcome was already in the log.
   */
  closing?: (done: DoneOutcome) => NewEvent[];
}

export type DoneOutcome = { kind: 'done'; ok: boolean; output: unknown; error: string | null };

export type CallOutcome = DoneOutcome | { kind: 'suspend' } | HardStop;

/** What a directive's execution leaves the loop with: go on, wait for a person, or end the task. */
export type ExecOutcome =
  { kind: 'continue' } | { kind: 'suspend' } | { kind: 'end'; stop: Stop; result: string | null };
