import { EventPayload, NewEvent } from '@runledger/contracts';
import { RegisteredTool } from '@runledger/tools';
import { Stop } from '../../../ports';
import { CallProgress, TaskProgress } from '../../../log/progress';
import { TaskFold } from '../../../log/task-fold';
import { CallSpec } from '../call-types';

/** A call to a known tool, as the gates see it before it runs. */
export interface GateCall {
  spec: CallSpec;
  tool: RegisteredTool;
  args_hash: string;
  progress: TaskProgress;
  /** the task's state so far, kept by its writer */
  fold: TaskFold;
  /** the call's intent recorded before a restart, if any */
  prior: CallProgress | undefined;
}

/**
 * What a gate decides about a call:
 * - allow: the next gate looks at it;
 * - suspend: the task waits for a person, after `events` (a request, or none when one is pending);
 * - deny: the call fails without running, recorded as TOOL_FAILED (`error`, `error_kind`);
 *   the step or orchestrator sees `step_error`;
 * - hard_stop: the task ends with `stop_reason`; when `recordFailure`, the call is
 *   recorded as TOOL_FAILED (hard_stop) first.
 */
export type GateVerdict =
  | { kind: 'allow' }
  | { kind: 'suspend'; events: NewEvent[] }
  | {
      kind: 'deny';
      error: string;
      error_kind: EventPayload<'TOOL_FAILED'>['error_kind'];
      step_error: string;
    }
  | { kind: 'hard_stop'; reason: string; stop_reason: Stop['stop_reason']; recordFailure: boolean };

/** One pre-call check; the ToolCallRunner walks them in order and the first verdict other than allow wins. */
export interface ToolGate {
  check(call: GateCall): GateVerdict | Promise<GateVerdict>;
}

export const ALLOW: GateVerdict = { kind: 'allow' };
