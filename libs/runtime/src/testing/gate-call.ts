import { ToolManifest, hashArgs } from '@runledger/contracts';
import { manifestOf } from './test-tools';
import { EventLogBuilder } from '../discipline/testing-events';
import { TaskFold } from '../log/task-fold';
import { GateCall } from '../loop/engine/gates/tool-gate';

export interface CallOptions {
  call_id?: string;
  args?: Record<string, unknown>;
  manifest?: Partial<ToolManifest>;
  requiresConfirmation?: boolean;
}

/**
 * The call a gate judges, over the task's log so far (`given`), the way the
 * ToolCallRunner builds it: the task's fold of that log, the prior intent of
 * the same call id if the log has one. For the gates' unit tests.
 */
export function callOf(given: EventLogBuilder, tool: string, o: CallOptions = {}): GateCall {
  const args = o.args ?? {};
  const fold = new TaskFold(given.taskId, given.events);
  const progress = fold.progress;
  const call_id = o.call_id ?? 'call_9';
  return {
    spec: { call_id, tool, args, step_id: null, requiresConfirmation: o.requiresConfirmation ?? false },
    tool: {
      manifest: manifestOf(tool, o.manifest),
      run: () => Promise.reject(new Error('a gate never runs the tool')),
    },
    args_hash: hashArgs(tool, args),
    progress,
    fold,
    prior: progress.calls.get(call_id),
  };
}
