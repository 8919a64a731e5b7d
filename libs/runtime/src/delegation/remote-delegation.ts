import {
  AgentProfile,
  EventPayload,
  NewEvent,
  RuntimeEvent,
  StopReason,
  emptyUsage,
  hashArgs,
  newId,
} from '@runledger/contracts';
import { elicitationCallId, elicitedCall, ChildProgress } from '../log/progress';
import { TaskWriter } from '../log/task-writer';
import { RunClock, SecretVault, WALL_CLOCK } from '../ports';
import { AgentCatalog } from './agent-catalog';
import { ChildEnd } from './child-tasks';
import {
  RemoteAgents,
  RemoteAnswer,
  RemoteCall,
  RemoteSnapshot,
  RemoteStep,
  isRemoteAsking,
  isRemoteEnd,
} from './remote-agents';

/** The rule of a permission request that forwards a remote agent's question. */
export const A2A_REMOTE_RULE = 'a2a_remote_input';

export interface RemoteDelegationDeps {
  remote: RemoteAgents;
  vault: SecretVault;
  clock?: RunClock;
}

/** The call a delegation to a remote agent makes, from its CHILD_TASK_STARTED. */
export function remoteCallOf(started: EventPayload<'CHILD_TASK_STARTED'>, agent: AgentProfile): RemoteCall {
  const remote = started.remote!;
  return {
    call_id: started.call_id,
    agent,
    message_id: remote.message_id,
    context_id: remote.context_id,
    input: started.input,
  };
}

/**
 * A delegation to a remote agent, resumable at every step: the remote task is opened (found by
 * the recorded message, else sent), each change the parent uses is recorded as REMOTE_TASK_UPDATED,
 * a question is forwarded as this task's own permission or secret request (the task waits for a
 * person; the answer is sent back when it resumes), and the end comes from the remote task's end.
 * What was recorded is never asked again: a resumed parent goes on from its last update.
 */
export class RemoteDelegation {
  constructor(private readonly deps: RemoteDelegationDeps) {}

  /** The remote task's end; 'suspend' while a person is asked; null when `signal` aborted first. */
  async run(
    writer: TaskWriter,
    callId: string,
    agent: AgentProfile,
    signal: AbortSignal,
  ): Promise<ChildEnd | 'suspend' | null> {
    const child = writer.progress.children.get(callId)!;
    const call = remoteCallOf(child.started, agent);
    const within = this.deadline(writer, callId, child, agent, signal);
    try {
      let last: RemoteSnapshot | null = child.remote;
      if (!last) {
        const opened = await this.recorded(
          writer,
          call,
          await this.deps.remote.open(call, within.signal),
          within,
        );
        if (!('snapshot' in opened)) return opened.end;
        last = opened.snapshot;
      }
      for (;;) {
        if (isRemoteEnd(last.state)) return endOfRemote(last, agent);
        let step: RemoteStep;
        if (isRemoteAsking(last.state)) {
          const asked = this.forwarded(writer, callId, last);
          if (!asked) {
            await writer.append([askEvent(call, last, nextAskIndex(writer, callId))]);
            return 'suspend';
          }
          const answer = this.answerTo(writer, asked);
          if (answer === 'waiting') return 'suspend';
          if (answer === 'lost') {
            // a secret given before a restart is gone with the process: the person is asked again
            await writer.append([askEvent(call, last, nextAskIndex(writer, callId))]);
            return 'suspend';
          }
          const index = Number(/\.elicit(\d+)$/.exec(asked.call_id)![1]);
          step = await this.deps.remote.answer(call, last, answer, index, within.signal);
          this.deps.vault.drop(writer.taskId, asked.call_id);
        } else step = await this.deps.remote.next(call, last, within.signal);
        const got = await this.recorded(writer, call, step, within);
        if (!('snapshot' in got)) return got.end;
        last = got.snapshot;
      }
    } finally {
      within.dispose();
    }
  }

  /** The step's update recorded; or the end it means (a failure, the time running out), or null (aborted). */
  private async recorded(
    writer: TaskWriter,
    call: RemoteCall,
    step: RemoteStep,
    within: Deadline,
  ): Promise<{ snapshot: RemoteSnapshot } | { end: ChildEnd | null }> {
    if (step === null)
      return {
        end: within.expired()
          ? failedEnd('timeout', `remote agent ${call.agent.name} did not finish within ${within.ms} ms`)
          : null,
      };
    if (step.kind === 'failed') return { end: failedEnd(step.stop_reason, step.error) };
    await writer.append([
      { type: 'REMOTE_TASK_UPDATED', payload: { call_id: call.call_id, ...step.snapshot } },
    ]);
    return { snapshot: step.snapshot };
  }

  /** The request this task made of a person for the question `last` asks: the latest made after `last` was recorded. */
  private forwarded(
    writer: TaskWriter,
    callId: string,
    last: RemoteSnapshot,
  ): EventPayload<'TASK_AWAITING_PERMISSION'> | EventPayload<'TASK_AWAITING_SECRET'> | null {
    let updatedAt = -1;
    let asked: EventPayload<'TASK_AWAITING_PERMISSION'> | EventPayload<'TASK_AWAITING_SECRET'> | null = null;
    for (const e of writer.log) {
      if (e.type === 'REMOTE_TASK_UPDATED' && e.payload.call_id === callId) {
        updatedAt = e.sequence;
        asked = null;
      } else if (
        (e.type === 'TASK_AWAITING_PERMISSION' || e.type === 'TASK_AWAITING_SECRET') &&
        elicitedCall(e.payload.call_id) === callId &&
        updatedAt >= 0
      )
        asked = e.payload;
    }
    return last.request ? asked : null;
  }

  /** The person's answer to a forwarded request; 'waiting' while it is pending, 'lost' for a secret a restart dropped. */
  private answerTo(
    writer: TaskWriter,
    asked: EventPayload<'TASK_AWAITING_PERMISSION'> | EventPayload<'TASK_AWAITING_SECRET'>,
  ): RemoteAnswer | 'waiting' | 'lost' {
    const p = writer.progress;
    const remoteRequestId = (asked: { call_id: string }) => requestIdOf(writer, asked.call_id);
    if ('args_hash' in asked) {
      const decided = p.permissionDecisions.get(asked.call_id);
      return decided ? { request_id: remoteRequestId(asked), decision: decided.decision } : 'waiting';
    }
    const [secret] = this.deps.vault.forCall(writer.taskId, asked.call_id).values();
    if (secret !== undefined) return { request_id: remoteRequestId(asked), secret };
    return p.pendingSecret?.call_id === asked.call_id ? 'waiting' : 'lost';
  }

  /**
   * The delegation's time: the carved budget and the agent's own limit, counted from when it
   * started (a remote task runs on while this process is down), less the time its questions waited
   * for a person (as a local child's waits are not its running time).
   */
  private deadline(
    writer: TaskWriter,
    callId: string,
    child: ChildProgress,
    agent: AgentProfile,
    signal: AbortSignal,
  ): Deadline {
    const limits = [child.started.budgets.timeout_ms, agent.timeout_ms].filter(
      (v): v is number => v !== undefined,
    );
    const ctrl = new AbortController();
    const onAbort = () => ctrl.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    let expired = false;
    let cancelTimer = () => undefined as void;
    const ms = limits.length > 0 ? Math.min(...limits) : null;
    if (ms !== null) {
      const clock = this.deps.clock ?? WALL_CLOCK;
      const since = remoteActiveMs(writer.log, callId, clock.now());
      cancelTimer = clock.after(Math.max(0, ms - since), () => {
        expired = true;
        ctrl.abort(new Error('remote agent timed out'));
      });
    }
    return {
      signal: ctrl.signal,
      ms: ms ?? 0,
      expired: () => expired && !signal.aborted,
      dispose: () => {
        cancelTimer();
        signal.removeEventListener('abort', onAbort);
      },
    };
  }
}

interface Deadline {
  signal: AbortSignal;
  ms: number;
  expired(): boolean;
  dispose(): void;
}

/**
 * How long a delegation has run by the log: from its CHILD_TASK_STARTED to `now`, less the spans
 * from each question it forwarded to the person's answer.
 */
export function remoteActiveMs(log: readonly RuntimeEvent[], callId: string, now: Date): number {
  let startedAt: number | null = null;
  let waited = 0;
  let waitingSince: number | null = null;
  const asked = new Set<string>();
  for (const e of log) {
    const at = Date.parse(e.created_at);
    if (e.type === 'CHILD_TASK_STARTED' && e.payload.call_id === callId) startedAt = at;
    else if (
      (e.type === 'TASK_AWAITING_PERMISSION' || e.type === 'TASK_AWAITING_SECRET') &&
      elicitedCall(e.payload.call_id) === callId
    ) {
      asked.add(e.payload.request_id);
      waitingSince ??= at;
    } else if (
      (e.type === 'PERMISSION_RESOLVED' || e.type === 'SECRET_PROVIDED') &&
      asked.has(e.payload.request_id) &&
      waitingSince !== null
    ) {
      waited += Math.max(0, at - waitingSince);
      waitingSince = null;
    }
  }
  if (startedAt === null) return 0;
  const waiting = waitingSince === null ? 0 : Math.max(0, now.getTime() - waitingSince);
  return Math.max(0, now.getTime() - startedAt - waited - waiting);
}

/** The remote's own id of the question a forwarded request stands for (null: it named none). */
function requestIdOf(writer: TaskWriter, requestCallId: string): string | null {
  let id: string | null = null;
  let last: RemoteSnapshot | null = null;
  for (const e of writer.log) {
    if (e.type === 'REMOTE_TASK_UPDATED' && e.payload.call_id === elicitedCall(requestCallId))
      last = e.payload;
    else if (
      (e.type === 'TASK_AWAITING_PERMISSION' || e.type === 'TASK_AWAITING_SECRET') &&
      e.payload.call_id === requestCallId
    ) {
      const named = last?.request?.data?.request_id;
      id = typeof named === 'string' ? named : null;
    }
  }
  return id;
}

const nextAskIndex = (writer: TaskWriter, callId: string): number =>
  writer.log.filter(
    (e) =>
      (e.type === 'TASK_AWAITING_PERMISSION' || e.type === 'TASK_AWAITING_SECRET') &&
      elicitedCall(e.payload.call_id) === callId,
  ).length + 1;

/**
 * A remote task's question as this task's request: auth-required asks for a secret (its data part's
 * `secret_name`, else `credentials`), input-required for a decision. The request carries what the
 * remote asked, so a person sees the remote's tool, arguments and reason.
 */
function askEvent(call: RemoteCall, last: RemoteSnapshot, index: number): NewEvent {
  const data = last.request?.data ?? null;
  const remoteTool = typeof data?.tool === 'string' ? `/${data.tool}` : '';
  const tool = `a2a:${call.agent.name}${remoteTool}`;
  const reason = `remote agent ${call.agent.name} asks: ${
    (typeof data?.reason === 'string' ? data.reason : null) ?? last.message ?? last.state
  }`;
  const call_id = elicitationCallId(call.call_id, index);
  if (last.state === 'auth-required')
    return {
      type: 'TASK_AWAITING_SECRET',
      payload: {
        request_id: newId('sec'),
        call_id,
        tool,
        secret_name: typeof data?.secret_name === 'string' ? data.secret_name : 'credentials',
        reason,
      },
    };
  const args = {
    remote_task_id: last.remote_task_id,
    message: last.message,
    request: data,
  };
  return {
    type: 'TASK_AWAITING_PERMISSION',
    payload: {
      request_id: newId('perm'),
      call_id,
      tool,
      args,
      args_hash: hashArgs(tool, args),
      rule: A2A_REMOTE_RULE,
      reason,
      ...(typeof data?.covers === 'string'
        ? { covers: `on remote agent ${call.agent.name}: ${data.covers}` }
        : {}),
    },
  };
}

const failedEnd = (stop_reason: StopReason, detail: string): ChildEnd => ({
  status: 'failed',
  stop_reason,
  detail,
  result: null,
  usage: emptyUsage(),
});

/** How a remote task's end reads to its parent: its artifacts' text (or final message) as the result. */
export function endOfRemote(s: RemoteSnapshot, agent: AgentProfile): ChildEnd {
  const text = s.artifacts.map((a) => a.text).filter((t) => t !== '');
  const result = text.length > 0 ? text.join('\n\n') : s.message;
  const usage = s.usage ?? emptyUsage();
  const own = StopReason.safeParse(s.stop_reason);
  switch (s.state) {
    case 'completed':
      return {
        status: 'completed',
        stop_reason: 'completed',
        detail: `remote agent ${agent.name} completed task ${s.remote_task_id}`,
        result: result ?? '',
        usage,
      };
    case 'canceled':
      return {
        status: 'cancelled',
        stop_reason: 'cancelled',
        detail: `remote agent ${agent.name} cancelled task ${s.remote_task_id}`,
        result: null,
        usage,
      };
    default:
      return {
        status: 'failed',
        stop_reason: own.success && own.data !== 'completed' ? own.data : 'tool_error',
        detail: `remote agent ${agent.name} ${s.state === 'rejected' ? 'rejected' : 'failed'} task ${s.remote_task_id}${
          s.message ? `: ${s.message}` : ''
        }`,
        result,
        usage,
      };
  }
}

/** Cancels the remote task of a delegation that has not ended (its agent still configured). */
export async function cancelRemoteChild(
  remote: RemoteAgents,
  agents: AgentCatalog,
  child: ChildProgress,
): Promise<void> {
  const agent = agents.get(child.started.agent);
  if (!child.started.remote || !agent?.a2a) return;
  await remote.cancel(remoteCallOf(child.started, agent), child.remote?.remote_task_id ?? null);
}
