import { Budgets, DelegateArgs, emptyUsage, remoteAgentAddress, sha256 } from '@runledger/contracts';
import { activeMs } from '../discipline/budgets';
import { RunClock, SecretVault, WALL_CLOCK } from '../ports';
import { childOutcomeText } from '../log/progress';
import { TaskWriter } from '../log/task-writer';
import { StepOutcome } from '../ports';
import { AgentCatalog } from './agent-catalog';
import { carveBudgets } from './carve-budgets';
import { withinSession } from '../discipline/session-budget';
import { ChildEnd, ChildTaskHost } from './child-tasks';
import { RemoteAgents, remoteContextIdFor, remoteMessageIdFor } from './remote-agents';
import { RemoteDelegation } from './remote-delegation';

export const DEFAULT_MAX_DELEGATION_DEPTH = 3;

export interface DelegationDeps {
  agents: AgentCatalog;
  children: ChildTaskHost;
  /** how many delegations down from a root a task may be */
  maxDepth: number;
  clock?: RunClock;
  /** where agents with `a2a` are reached; a task cannot delegate to one when absent */
  remote?: { agents: RemoteAgents; vault: SecretVault };
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
  private readonly remote: RemoteDelegation | null;

  constructor(private readonly deps: DelegationDeps) {
    this.remote = deps.remote
      ? new RemoteDelegation({ remote: deps.remote.agents, vault: deps.remote.vault, clock: deps.clock })
      : null;
  }

  async run(writer: TaskWriter, spec: DelegationSpec, signal: AbortSignal): Promise<StepOutcome> {
    const p = writer.progress;
    if (!p.children.has(spec.call_id)) {
      const admitted = this.admit(writer, spec.args);
      if (typeof admitted === 'string') return { kind: 'failed', error: admitted };
      const link = this.deps.agents.get(spec.args.agent)!.a2a;
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
            // the message is named before it is sent: a resumed parent finds what it sent by it
            ...(link
              ? {
                  remote: {
                    url: remoteAgentAddress(link),
                    message_id: remoteMessageIdFor(p.task_id, spec.call_id),
                    context_id: remoteContextIdFor(p.task_id, spec.call_id),
                  },
                }
              : {}),
          },
        },
      ]);
    }
    const child = writer.progress.children.get(spec.call_id)!;
    if (!child.ended) {
      const started = child.started;
      const agent = this.deps.agents.get(started.agent);
      let end: ChildEnd | null;
      if (started.remote) {
        const remoteEnd =
          agent?.a2a && this.remote
            ? await this.remote.run(writer, spec.call_id, agent, signal)
            : gone(`remote agent ${started.agent} is no longer configured`);
        if (remoteEnd === 'suspend') return { kind: 'suspend' };
        end = remoteEnd;
      } else
        end =
          agent && !agent.a2a
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
            : // started before a restart under a config that had this agent; the child was never created
              gone(`agent ${started.agent} is no longer configured as a local agent`);
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
    const agent = this.deps.agents.get(args.agent);
    if (!agent) return `unknown agent ${args.agent}; the agents are: ${this.deps.agents.names().join(', ')}`;
    if (agent.a2a && !this.remote)
      return `agent ${args.agent} is remote and this runtime reaches no remote agents`;
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
    const own = p.settings?.discipline?.budgets ?? null;
    const carve = carveBudgets(
      args.budgets,
      own && withinSession(own, p.session_budget, p.usage),
      p.usage,
      activeMs(p.meter, now),
      running,
    );
    return carve.ok ? { budgets: carve.budgets } : carve.error;
  }
}

const gone = (detail: string): ChildEnd => ({
  status: 'failed',
  stop_reason: 'validation_error',
  detail,
  result: null,
  usage: emptyUsage(),
});
