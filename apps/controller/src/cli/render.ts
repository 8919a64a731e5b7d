import { RuntimeEvent, TaskUsage, TodoItem } from '@runledger/contracts';
import type { Tone } from './output';
import { SYS_UTIL } from '@runledger/runtime';

const short = (v: unknown, max = 120): string => {
  const s = (typeof v === 'string' ? v : (JSON.stringify(v) ?? '')).replace(/\s+/g, ' ').trim();
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
};

/**
 * A provider that reports no usage is not a call that cost nothing: the task's total estimates it.
 * sys_util is no model, so its answers use no tokens at all.
 */
const tokens = (model: string, u: { total_tokens: number; estimated?: boolean }): string =>
  model === SYS_UTIL
    ? 'no model, no tokens'
    : u.estimated
      ? `~${u.total_tokens} tokens, estimated`
      : u.total_tokens > 0
        ? `${u.total_tokens} tokens`
        : 'usage not reported';

/** One human-readable line per event; null for events not worth a line (stream chunks). */
export function eventLine(e: RuntimeEvent): string | null {
  switch (e.type) {
    case 'TASK_RECEIVED':
      return `▶ task ${e.task_id} received: ${short(e.payload.input)}`;
    case 'CONTEXT_BUILT':
      return `· round ${e.payload.round}: context ${e.payload.total_tokens} tokens${e.payload.cut.length ? `, cut ${e.payload.cut.join(', ')}` : ''}`;
    case 'MODEL_CALLED':
      return `· asking ${e.payload.role} (${e.payload.backend}:${e.payload.model})`;
    case 'MODEL_RESPONDED':
      return e.payload.error
        ? `! ${e.payload.role} call failed: ${e.payload.error.kind}: ${short(e.payload.error.message)}`
        : `· ${e.payload.role} answered in ${Math.round(e.payload.latency_ms)} ms (${tokens(e.payload.model, e.payload.usage)})`;
    case 'ROUTER_DECIDED': {
      const d = e.payload.directive;
      const what =
        d.type === 'tool'
          ? `tool ${d.tool} ${short(d.args, 80)}`
          : d.type === 'plan'
            ? `plan of ${d.steps.length} steps`
            : d.type === 'respond'
              ? 'respond'
              : d.type === 'delegate'
                ? `delegate to ${d.agent}: ${short(d.input, 80)}`
                : d.type === 'wait'
                  ? `wait ${d.until !== undefined ? `until ${d.until}` : `${d.duration_ms} ms`}`
                  : d.type === 'wait_for_signal'
                    ? `wait for signal ${d.name}${d.timeout_ms !== undefined ? `, at most ${d.timeout_ms} ms` : ''}`
                    : `fail: ${short(d.reason)}`;
      return `→ round ${e.payload.round}: ${what} [${e.payload.source}${e.payload.fallback_reason ? `, fallback: ${short(e.payload.fallback_reason, 80)}` : ''}]`;
    }
    case 'PLAN_STARTED':
      return `→ plan ${e.payload.plan_id}: ${e.payload.steps.map((s) => `${s.id}${s.depends_on.length ? `(after ${s.depends_on.join(',')})` : ''}`).join(' ')}`;
    case 'PLAN_COMPLETED':
      return `✓ plan ${e.payload.plan_id} completed`;
    case 'PLAN_FAILED':
      return `✗ plan failed: ${short(e.payload.reason)}`;
    case 'STEP_STARTED':
      return `  ▸ step ${e.payload.step_id} (${e.payload.kind})`;
    case 'STEP_COMPLETED':
      return `  ✓ step ${e.payload.step_id}: ${short(e.payload.output, 80)}`;
    case 'STEP_FAILED':
      return `  ✗ step ${e.payload.step_id} ${e.payload.skipped ? 'skipped' : 'failed'}: ${short(e.payload.error)}`;
    case 'TOOL_CALLED':
      return `  ⚙ ${e.payload.tool} ${short(e.payload.args, 100)}`;
    case 'TOOL_COMPLETED':
      return `  ✓ ${e.payload.tool} (${Math.round(e.payload.duration_ms)} ms): ${short(e.payload.result.output, 100)}`;
    case 'TOOL_FAILED':
      return `  ✗ ${e.payload.tool} ${e.payload.error_kind}: ${short(e.payload.error)}`;
    case 'TASK_AWAITING_PERMISSION':
      return `? permission needed: ${e.payload.tool} ${short(e.payload.args, 100)} (${e.payload.reason})${e.payload.covers ? `\n  ${e.payload.covers}` : ''}`;
    case 'PERMISSION_RESOLVED':
      return `· permission ${e.payload.decision} for ${e.payload.tool}${e.payload.covers ? ` (${e.payload.covers})` : ''}`;
    case 'TASK_AWAITING_SECRET':
      return `? secret needed: ${e.payload.secret_name} for ${e.payload.tool}`;
    case 'SECRET_PROVIDED':
      return `· secret ${e.payload.secret_name} provided`;
    case 'TASK_AWAITING_CLIENT_TOOL':
      return `? waiting for the client to run ${e.payload.tool} ${short(e.payload.args, 100)}`;
    case 'CRITIC_RESULT':
      return `· critic: ${e.payload.score ? `correctness ${e.payload.score.correctness}, weight ${e.payload.score.weight}` : `error ${e.payload.error}`}`;
    case 'ANSWER_EVALUATED':
      return e.payload.score === null
        ? `· answer not evaluated: ${short(e.payload.error ?? '', 100)}`
        : `· answer scored ${e.payload.score} (threshold ${e.payload.threshold})${e.payload.retry ? ', asking once more' : ''}: ${short(e.payload.feedback, 80)}`;
    case 'MEMORY_WRITTEN':
      return `· memory ${e.payload.op}: ${e.payload.text === undefined ? e.payload.entry_id : short(e.payload.text, 80)}`;
    case 'CHECKPOINT_SAVED':
      return `· checkpoint ${e.payload.label}`;
    case 'ACCEPTANCE_DECIDED':
      return `${e.payload.passed ? '✓' : '✗'} acceptance: ${e.payload.results.map((r) => `${r.id} ${r.passed ? 'passed' : 'failed'}`).join(', ')}`;
    case 'CHILD_TASK_STARTED':
      return e.payload.remote
        ? `  ⇢ remote agent ${e.payload.agent} (${e.payload.remote.url}) sent: ${short(e.payload.input, 80)}`
        : `  ⇢ ${e.payload.agent} agent started as task ${e.payload.child_task_id}: ${short(e.payload.input, 80)}`;
    case 'REMOTE_TASK_UPDATED':
      return `  · remote task ${e.payload.remote_task_id} ${e.payload.state}${e.payload.message ? `: ${short(e.payload.message, 80)}` : ''}`;
    case 'CHILD_TASK_ENDED':
      return `  ${e.payload.status === 'completed' ? '✓' : '✗'} task ${e.payload.child_task_id} ${e.payload.stop_reason}: ${short(e.payload.result ?? e.payload.detail, 80)}`;
    case 'TODO_ADDED':
      return `  ☐ todo ${e.payload.todo_id}${e.payload.required ? '' : ' (optional)'}: ${short(e.payload.text, 100)}`;
    case 'TODO_UPDATED':
      return `  ${e.payload.status === 'done' ? '☑' : '☐'} todo ${e.payload.todo_id} ${e.payload.status}${e.payload.note ? `: ${short(e.payload.note, 80)}` : ''}`;
    case 'TIMER_SET':
      return `… waiting until ${e.payload.due_at} (step ${e.payload.step_id})`;
    case 'TIMER_FIRED':
      return `· timer ${e.payload.timer_id} fired`;
    case 'SIGNAL_RECEIVED':
      return `· signal ${e.payload.name} received (${e.payload.signal_id}): ${short(e.payload.payload, 80)}`;
    case 'SIGNAL_AWAITED':
      return `… waiting for signal ${e.payload.name}${e.payload.timeout_ms !== null ? `, at most ${e.payload.timeout_ms} ms` : ''} (step ${e.payload.step_id})`;
    case 'SIGNAL_DELIVERED':
      return `· signal ${e.payload.name} (${e.payload.signal_id}) taken by the wait`;
    case 'GUARD_TRIGGERED':
      return `! ${e.payload.guard}: ${short(e.payload.detail)}`;
    case 'OUTPUT_CHUNK':
    case 'REASONING_CHUNK':
      return null;
    case 'CALLBACK_REGISTERED':
      return `· callback ${e.payload.callback_id} registered: ${e.payload.url}`;
    case 'CALLBACK_REMOVED':
      return `· callback ${e.payload.callback_id} removed`;
    case 'DELIVERY_STARTED':
      return `· delivery ${e.payload.delivery_id} of event ${e.payload.seq}, attempt ${e.payload.attempt}`;
    case 'DELIVERY_SUCCEEDED':
      return `· delivery ${e.payload.delivery_id} answered ${e.payload.status_code}`;
    case 'TASKS_ARCHIVED':
      return `· archived ${e.payload.task_ids.length} task(s), ${e.payload.events} events, into ${e.payload.segment_id}`;
    case 'TASKS_CATALOGUED':
      return `· catalogued ${e.payload.tasks} archived task(s) of ${e.payload.segment_ids.length} segment(s)`;
    case 'TASKS_RESTORED':
      return `· restored ${e.payload.task_ids.length} task(s) from ${e.payload.segment_id}`;
    case 'SESSION_ERASED':
      return `· session ${e.payload.session_id} erased (${e.payload.task_ids.length} task(s))`;
    case 'TASK_TREE_ERASED':
      return `· task tree ${e.payload.root_task_id} of session ${e.payload.session_id} erased (${e.payload.task_ids.length} task(s))`;
    case 'SESSION_BUDGET_SET':
      return `· session budget: ${e.payload.max_tokens ?? 'no'} tokens, ${e.payload.max_cost_usd === null ? 'no cost limit' : `$${e.payload.max_cost_usd}`}`;
    case 'DELIVERY_FAILED':
      return `! delivery ${e.payload.delivery_id} failed: ${short(e.payload.error, 80)}${e.payload.retry_at ? `; again at ${e.payload.retry_at}` : '; given up'}`;
    case 'TASK_COMPLETED':
      return `■ completed`;
    case 'TASK_FAILED':
      return `■ failed: ${e.payload.stop_reason}`;
    case 'TASK_CANCELLED':
      return e.payload.stop_reason === 'interrupted'
        ? `■ interrupted: ${short(e.payload.detail)}`
        : `■ cancelled`;
    case 'SESSION_TURN_BEGAN':
      return `· its turn in the session began (after ${e.payload.after_task_id})`;
    case 'INTERRUPT_REQUESTED':
      return `· interrupted by ${e.payload.by_task_id}: stopping at the next safe point`;
    case 'SESSION_CONFIGURED':
      return `· session strategy: ${e.payload.on_busy}`;
    case 'TASK_ROLLED_BACK':
      return `· task ${e.payload.task_id} rolled back by ${e.payload.by_task_id}`;
    case 'SCHEDULE_CREATED':
      return `· schedule ${e.payload.schedule_id} created: ${e.payload.spec.cron} (${e.payload.spec.time_zone})`;
    case 'SCHEDULE_PAUSED':
    case 'SCHEDULE_RESUMED':
    case 'SCHEDULE_DELETED':
      return `· schedule ${e.payload.schedule_id} ${e.type.slice('SCHEDULE_'.length).toLowerCase()}`;
    case 'SCHEDULE_FIRED':
      return `· schedule ${e.payload.schedule_id} slot ${e.payload.slot}: ${e.payload.outcome}${e.payload.task_id ? ` (${e.payload.task_id})` : ''}`;
    case 'HOOK_RECEIVED':
      return `· hook ${e.payload.hook} delivery ${e.payload.delivery_id}: ${e.payload.action}${e.payload.signal_name ? ` ${e.payload.signal_name}` : ''}${e.payload.task_id ? ` (${e.payload.task_id})` : ''}`;
  }
}

/** One todo of the task's list, as the summary shows it. */
export const todoLine = (t: TodoItem): string =>
  `${t.status === 'done' ? '☑' : '☐'} ${t.id} [${t.status}${t.required ? '' : ', optional'}${t.active ? '' : ', not current'}] ${short(t.text, 100)}${t.note ? ` (${short(t.note, 80)})` : ''}`;

export function usageLine(u: TaskUsage): string {
  return `rounds ${u.rounds} · tool calls ${u.tool_calls} · model calls ${u.model_calls} · tokens ${u.total_tokens} (prompt ${u.prompt_tokens}, completion ${u.completion_tokens}) · cost $${u.cost_usd.toFixed(4)}`;
}

/** A tool call a crash cut off: its intent is in the log, its outcome is not, and it was not run again. */
export interface UnknownOutcome {
  call_id: string;
  tool: string;
  args: Record<string, unknown>;
}

export function unknownOutcomes(events: readonly RuntimeEvent[]): UnknownOutcome[] {
  const args = new Map<string, Record<string, unknown>>();
  const unknown: UnknownOutcome[] = [];
  for (const e of events) {
    if (e.type === 'TOOL_CALLED') args.set(e.payload.call_id, e.payload.args);
    if (e.type === 'TOOL_FAILED' && e.payload.error_kind === 'outcome_unknown')
      unknown.push({
        call_id: e.payload.call_id,
        tool: e.payload.tool,
        args: args.get(e.payload.call_id) ?? {},
      });
  }
  return unknown;
}

export const unknownOutcomeLine = (u: UnknownOutcome): string =>
  `! check by hand: ${u.tool} ${short(u.args, 100)} (${u.call_id}) was cut off by a restart; it may or may not have taken effect and was not run again`;

/** The colour of an event line, read from the mark eventLine starts it with. */
export function eventTone(line: string): Tone | null {
  const text = line.trimStart();
  if (text.startsWith('■'))
    return text.startsWith('■ completed') ? 'green' : text.startsWith('■ failed') ? 'red' : 'yellow';
  switch (text[0]) {
    case '✓':
      return 'green';
    case '✗':
      return 'red';
    case '!':
      return 'yellow';
    case '?':
      return 'cyan';
    case '·':
      return 'dim';
    case '▶':
    case '→':
      return 'bold';
    default:
      return null;
  }
}
