import { INestApplicationContext } from '@nestjs/common';
import {
  FINAL_EVENT_TYPES,
  NotFoundError,
  RuntimeEvent,
  SessionBudget,
  TaskStatus,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { TaskView, TaskViews } from '@runledger/runtime';
import { CliOutput } from './output';
import { eventLine } from './render';

/** How often `events --follow` looks for new events of a task another process runs. */
const FOLLOW_POLL_MS = 200;
const PAGE = 1000;

/** One task as `runledger tasks` lists it: id, status, stop reason, when it was received, its input. */
export function taskRow(t: TaskView): string {
  return [
    t.task_id,
    t.status.padEnd(19),
    (t.stop_reason ?? '-').padEnd(25),
    t.created_at,
    t.input_first_line,
  ].join('  ');
}

/** `runledger tasks`: a page of tasks, newest first, on stdout (a line each, or one JSON line). */
export async function listTasks(
  app: INestApplicationContext,
  io: CliOutput,
  q: { status: TaskStatus | null; session: string | null; limit: number; json: boolean },
): Promise<number> {
  const page = await app.get(TaskViews).list({
    limit: q.limit,
    ...(q.status ? { status: q.status } : {}),
    ...(q.session ? { session_id: q.session } : {}),
  });
  if (q.json) io.answer(JSON.stringify({ tasks: page.tasks, next_cursor: page.next_cursor }));
  else if (page.tasks.length === 0) io.progress('no tasks', 'dim');
  else for (const t of page.tasks) io.answer(taskRow(t));
  if (!q.json && page.next_cursor)
    io.progress(`more tasks than ${q.limit}; raise --limit to see them`, 'dim');
  return 0;
}

/** One event as `runledger events` prints it: sequence, commit time, type, and what it says. */
export function eventRow(e: RuntimeEvent): string {
  const said = eventLine(e);
  return `${String(e.sequence).padStart(4)}  ${e.created_at}  ${e.type}${said ? `  ${said.trim()}` : ''}`;
}

/**
 * `runledger events <id> [--follow]`: the task's events in order on stdout; with --follow the ones written
 * later too (by this or any other process on the database), until the task's final event or Ctrl-C.
 */
export async function printEvents(
  app: INestApplicationContext,
  io: CliOutput,
  q: { task_id: string; follow: boolean; json: boolean },
): Promise<number> {
  if (!(await app.get(TaskViews).get(q.task_id)))
    throw new NotFoundError(`task ${q.task_id} not found`, { task_id: q.task_id });
  const store = app.get(EventStore);
  let after = 0;
  let ended = false;
  let interrupted = false;
  const onSigint = () => (interrupted = true);
  process.once('SIGINT', onSigint);
  try {
    for (;;) {
      const page = await store.readStream(q.task_id, { after_seq: after, limit: PAGE });
      for (const e of page) {
        io.answer(q.json ? JSON.stringify(e) : eventRow(e));
        after = e.sequence;
        if (FINAL_EVENT_TYPES.includes(e.type)) ended = true;
      }
      if (page.length === PAGE) continue;
      if (!q.follow || ended || interrupted) return 0;
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
    }
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
}

/** A session's budget as `runledger session-budget` prints it. */
export function sessionBudgetText(sessionId: string, b: SessionBudget | null): string {
  if (!b) return `session ${sessionId} has no budget`;
  const limits = [
    b.max_tokens === null ? null : `${b.used_tokens} of ${b.max_tokens} tokens used`,
    b.max_cost_usd === null ? null : `$${b.used_cost_usd.toFixed(6)} of $${b.max_cost_usd} spent`,
  ].filter(Boolean);
  const origin = b.source === 'setting' ? "the session's setting" : `set by task ${b.set_by}`;
  return `session ${sessionId}: ${limits.join(', ')} (${origin}; ${b.tasks_counted} task(s) counted)`;
}
