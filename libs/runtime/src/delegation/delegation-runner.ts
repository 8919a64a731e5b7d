import { Budgets, DelegateArgs, emptyUsage, sha256 } from '@runledger/contracts';
import { activeMs } from '../discipline/budgets';
import { RunClock, WALL_CLOCK } from '../ports';
import { childOutcomeText } from '../log/progress';
import { TaskWriter } from '../log/task-writer';
import { StepOutcome } from '../loop/engine/call-types';
import { AgentCatalog } from './agent-catalog';
import { carveBudgets } from './carve-budgets';
import { ChildTaskHost } from './child-tasks';

export const DEFAULT_MAX_DELEGATION_DEPTH = 3;

export interface DelegationDeps {
  agents: AgentCatalog;
  children: ChildTaskHost;
  /** how many delegations down from a root a task may be */
  maxDepth: number;
  clock?: RunClock;
}

/** One delegation as the engine runs it: a plan step's (`agent`) or a delegate directive's. */
export interface DelegationSpec {
  call_id: string;
  step_id: string | null;
  args: DelegateArgs;
}

/** A child's task id follows from its parent and call: a resumed parent finds the child it started, never a second one. */
export const childTaskIdFor = (parentTaskId: string, callId: string): string =>
  `task_${sha256(`child:${parentTaskId}:${callId}`).slice(0, 32)}`;

/**
 * Runs a delegation: checks the agent, the depth and the budget left, records
 * CHILD_TASK_STARTED (the intent), has the child created and run, waits for its
 * final event and records CHILD_TASK_ENDED. Durable: each of those is read back
 * from the log first, so a parent resumed after a restart waits for the child
 * it started (which resumes on its own), or takes the end the child recorded
 * while the parent was down.
 */
export class DelegationRunner {
  constructor(private readonly deps: DelegationDeps) {}

  async run(writer: TaskWriter, spec: DelegationSpec, signal: AbortSignal): Promise<StepOutcome> {
    const p = writer.progress;
    if (!p.children.has(spec.call_id)) {
      const admitted = this.admit(writer, spec.args);
      if (typeof admitted === 'string') return { kind: 'failed', error: admitted };
      await writer.append([
        {
          type: 'CHILD_TASK_STARTED',
          payload: {
            call_id: spec.call_id,
            step_id: spec.step_id,
            child_task_id: childTaskIdFor(p.task_id, spec.call_id),
            agent: spec.args.agent,
            input: spec.args.input,
            budgets: admitted.budgets,
            accept_checks: spec.args.accept_checks ?? [],
            depth: p.depth + 1,
          },
        },
      ]);
    }
    const child = writer.progress.children.get(spec.call_id)!;
    if (!child.ended) {
      const started = child.started;
      const agent = this.deps.agents.get(started.agent);
      const end = agent
        ? await this.deps.children
            .startChild({
              task_id: started.child_task_id,
              call_id: spec.call_id,
              session_id: writer.progress.session_id,
              parent_task_id: writer.progress.task_id,
              root_task_id: writer.progress.root_task_id,
              depth: started.depth,
              agent,
              input: started.input,
              budgets: started.budgets,
              accept_checks: started.accept_checks,
            })
            .then(() => this.deps.children.childEnded(started.child_task_id, signal))
        : {
            // started before a restart under a config that had this agent; the child was never created
            status: 'failed' as const,
            stop_reason: 'validation_error' as const,
            detail: `agent ${started.agent} is no longer configured`,
            result: null,
            usage: emptyUsage(),
          };
      if (!end) return { kind: 'suspend' };
      await writer.append([
        {
          type: 'CHILD_TASK_ENDED',
          payload: {
            call_id: spec.call_id,
            step_id: spec.step_id,
            child_task_id: started.child_task_id,
            ...end,
          },
        },
      ]);
    }
    const ended = writer.progress.children.get(spec.call_id)!.ended!;
    return ended.status === 'completed'
      ? { kind: 'completed', output: ended.result ?? '' }
      : { kind: 'failed', error: childOutcomeText(ended) };
  }

  /** the child's budgets, or why the delegation may not start (unknown agent, too deep, no budget left) */
  private admit(writer: TaskWriter, args: DelegateArgs): string | { budgets: Budgets } {
    const p = writer.progress;
    if (!this.deps.agents.get(args.agent))
      return `unknown agent ${args.agent}; the agents are: ${this.deps.agents.names().join(', ')}`;
    if (p.depth + 1 > this.deps.maxDepth)
      return `delegation depth limit reached: task ${p.task_id} is ${p.depth} delegation(s) down and the limit is ${this.deps.maxDepth}`;
    // children whose start is committed hold their budgets; those starting together with this one (handed to
    // the writer, not yet committed: the steps of one plan) each carve from the same remainder
    const startedAt = new Map(
      writer.log.flatMap((e) => (e.type === 'CHILD_TASK_STARTED' ? [[e.payload.call_id, e.sequence]] : [])),
    );
    const running = [...p.children.entries()]
      .filter(([call_id, c]) => !c.ended && (startedAt.get(call_id) ?? Infinity) <= writer.committedThrough)
      .map(([, c]) => c.started.budgets);
    const now = (this.deps.clock ?? WALL_CLOCK).now();
    const carve = carveBudgets(
      args.budgets,
      p.settings?.discipline?.budgets ?? null,
      p.usage,
      activeMs(p.meter, now),
      running,
    );
    return carve.ok ? { budgets: carve.budgets } : carve.error;
  }
}
