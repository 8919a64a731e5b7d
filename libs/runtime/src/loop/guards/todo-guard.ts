import { Stop } from '../../ports';
import { GuardVerdict, LoopGuard, RoundGuardContext } from './loop-guard';
import { NewEvent } from '@runledger/contracts';
import { acceptAtEnd } from './discipline-guard';
import { classifyRequest } from '../../discipline/request-intent';
import { guardEvent } from '../../discipline/retry-runner';
import { TODO_REMINDER } from '../../discipline/todos';

/**
 * The todos' guard. Before a round: a direct request for a change that has no todos and no plan
 * gets one reminder to create its own (when the run's settings turn todos on). At the end, for a
 * runtime without run discipline (whose guard judges todos with the accept checks): the active
 * required todos must be done.
 */
export class TodoGuard implements LoopGuard {
  constructor(private readonly judgeAtEnd: boolean) {}

  async beforeRound(ctx: RoundGuardContext): Promise<GuardVerdict> {
    const p = ctx.progress;
    if (p.settings?.todos !== 'on' || p.todos.reminded || p.todos.items.size > 0 || p.plans.size > 0)
      return {};
    const intent = classifyRequest(p.input);
    if (!intent.mutation) return {};
    return { events: [guardEvent('todo_reminder', ctx.round, TODO_REMINDER, { reason: intent.reason })] };
  }

  async beforeEnd(
    ctx: RoundGuardContext & { stop: Stop; result: string | null },
  ): Promise<{ events?: NewEvent[]; stop?: Stop }> {
    return this.judgeAtEnd ? acceptAtEnd(ctx, null, []) : {};
  }
}
