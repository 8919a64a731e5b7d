import { EventPayload, StopReason } from '@runledger/contracts';

const TEXT: Record<StopReason, string> = {
  completed: 'The task finished and gave its answer.',
  accept_check_failed: 'The task answered, but a required acceptance check did not pass.',
  validation_error:
    'The model kept producing output that is not a valid directive, so nothing malformed was executed.',
  provider_error: 'The model provider kept failing and no fallback was left.',
  authentication_error: 'The model provider refused the credentials; check the API key.',
  rate_limited: 'The model provider kept rate-limiting the requests and no fallback was left.',
  timeout: 'A model request, tool call or the task itself ran out of time.',
  tool_error: 'A tool kept failing, so the task stopped instead of trying it again.',
  permission_denied: 'A tool call needed permission and it was denied.',
  budget_exceeded:
    'The task used up one of its budgets (rounds, tool calls, model calls, failures, tokens, cost or time).',
  repeat_cycle: 'The agent kept repeating the same step with the same result, even after a reminder.',
  missing_completion_signal: 'The orchestrator kept answering without a directive, even after reminders.',
  model_gave_up: 'The model gave up on the task and said why.',
  mutation_refused:
    'The model kept calling tools the round did not allow (a change the request did not ask for, or a tool when the answer was due); none of them ran.',
  remote_unavailable:
    'A remote agent (A2A) could not be used: it could not be reached or kept failing (connection refused, reset or timed out; HTTP 5xx or 429) through every retry, its agent card could not be read or offers no protocol this runtime speaks, or it refused the request.',
  not_understood:
    'No model is configured and the built-in command parser (sys_util) does not understand the input; its answer lists what it does understand.',
  cancelled: 'The task was cancelled.',
  interrupted:
    'A newer message of the session interrupted the task (its strategy is interrupt); the newer task runs next, with this one in its history.',
};

/** One sentence a person can read, plus the specifics when there are any. */
export function describeStop(reason: StopReason, specifics?: string | null): string {
  return specifics ? `${TEXT[reason]} ${specifics}` : TEXT[reason];
}

export const stopReasonText = (reason: StopReason): string => TEXT[reason];

/**
 * The stop of a `fail` directive. A denied tool call is the cause when there
 * was one, then a remote agent that could not be used (nothing else could have
 * been done about either). sys_util only answers `fail` to report that the step
 * it ran failed, so its fail is a tool_error; a model's fail is the model's own
 * decision to give up, whatever failed before it.
 */
export function failDirectiveStop(
  progress: {
    calls: ReadonlyMap<string, { error_kind?: string | null }>;
    children: ReadonlyMap<string, { ended: { stop_reason: StopReason } | null }>;
  },
  lastDecision: EventPayload<'ROUTER_DECIDED'> | null,
): StopReason {
  if ([...progress.calls.values()].some((c) => c.error_kind === 'permission_denied'))
    return 'permission_denied';
  if ([...progress.children.values()].some((c) => c.ended?.stop_reason === 'remote_unavailable'))
    return 'remote_unavailable';
  return lastDecision?.source === 'sys_util' ? 'tool_error' : 'model_gave_up';
}
