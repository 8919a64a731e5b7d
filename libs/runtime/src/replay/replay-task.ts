import { randomBytes } from 'node:crypto';
import { NestFactory } from '@nestjs/core';
import {
  DEFAULT_ON_BUSY,
  EventPayload,
  IllegalStateError,
  NewEvent,
  NotFoundError,
  RuntimeEvent,
  refuseErasedContent,
} from '@runledger/contracts';
import { LabelledBackend, recordedProviderLabels } from '../model/providers';
import { SYS_UTIL } from '../model/sys-util-name';
import { RecordedWorkspaceView } from '../discipline/workspace-view';
import { RecordedClock, RecordedClockEventStore } from './replay-clock';
import { RecordedArrivals, takenOnArrival } from './recorded-arrivals';
import { runShapingOf } from '../log/run-settings';
import { ClientToolAnswer, RuntimeController } from '../control/runtime-controller';
import { RuntimeParts } from '../runtime-options';
import { DynamicModule } from '@nestjs/common';
import { RecordedChildTasks } from '../delegation/child-tasks';
import { RecordedRemoteAgents } from '../delegation/remote-agents';
import { TaskProgress, elicitedCall, pendingSignalWait, pendingTimer } from '../log/progress';
import { RecordedTimers } from '../loop/engine/timers';
import {
  ReplayBackend,
  ReplayedSysUtil,
  ReplayMemoryRecall,
  ReplayPermissionPolicy,
  ReplayToolRegistry,
  recordedJitter,
  replayCriticHook,
} from './recorded-parts';
import { ReplayRequest, ReplayResult, SubmitOptions } from '../control/runtime-controller';

export async function recordedTask(
  store: { readWholeStream(id: string): Promise<RuntimeEvent[]> },
  taskId: string,
): Promise<RuntimeEvent[]> {
  const events = await store.readWholeStream(taskId);
  if (events.length === 0) throw new NotFoundError(`task ${taskId} not found`);
  refuseErasedContent(taskId, events, 'a replay cannot reproduce it');
  return events;
}

/**
 * Re-run a recorded task offline as a new task (source `replay`): the model
 * answers, tool outcomes and critic replies come from its log, nothing is called
 * or run, and memory is not written. It runs under the settings its TASK_RECEIVED
 * recorded (a log without them: this process's), on a log of its own in memory
 * whose clock is the recording's timestamps (RecordedClock), so neither the
 * environment nor the wall clock changes its course, and nothing of it reaches
 * the live log unless `save` asks for the ended task to be written there.
 * The replay's events match the original's in type, order and payload (see replayView).
 */
export async function runReplay(
  /** the runtime module over the recorded stand-ins (RuntimeModule.forParts, handed in by the module that wires replay) */
  buildRuntime: (parts: RuntimeParts) => DynamicModule,
  options: ReplayOptions,
  sourceTaskId: string,
  request: ReplayRequest = {},
): Promise<ReplayResult> {
  const events = await recordedTask(options.store, sourceTaskId);
  const first = events[0];
  if (first.type !== 'TASK_RECEIVED') throw new NotFoundError(`stream ${sourceTaskId} is not a task`);
  const recordedSettings = first.payload.settings ?? null;
  const shaping = recordedSettings
    ? runShapingOf(recordedSettings)
    : { maxRounds: options.maxRounds, discipline: options.discipline };
  const clock = RecordedClock.fromRecording(events);
  const ownLog = new RecordedClockEventStore(clock, RecordedArrivals.fromEvents(events));
  const backend = ReplayBackend.fromEvents(events);
  const critic = replayCriticHook(events, backend);
  // The recorded answers of every provider are in one list per role, in call order; the chain is
  // rebuilt under the recorded labels so the replay retries, switches and names providers the same.
  const [primary, ...fallbacks] = recordedProviderLabels(events);
  const sysUtil = new ReplayedSysUtil(backend);
  // A recording whose orchestrator was sys_util itself (no model) is replayed with sys_util as the
  // orchestrator again, so the router decides as it did: input sys_util did not understand stops the
  // task (not_understood) rather than being taken for a model's answer.
  const model = sysUtilOrchestrated(events)
    ? sysUtil
    : primary === undefined
      ? backend
      : new LabelledBackend(backend, primary);
  const app = await NestFactory.createApplicationContext(
    buildRuntime({
      ...options,
      ...shaping,
      store: ownLog,
      clock,
      tools: new ReplayToolRegistry(options.tools, events),
      permissions: new ReplayPermissionPolicy(events),
      model,
      fallbackModels: fallbacks.map((label) => new LabelledBackend(backend, label)),
      sysUtil,
      rng: recordedJitter(events, shaping.discipline?.retry, options.rng),
      // The live hooks (critic + memory write policy) are not run: the critic is reproduced
      // from the log and memory is not written (see replayCriticHook).
      hooks: critic ? [critic] : [],
      memory: new ReplayMemoryRecall(events),
      // the accept gate decides from what the recording saw in the workspace, not from the disk now
      workspace: new RecordedWorkspaceView(events),
      // a replay writes no checkpoints (and its comparison leaves them out, see replayView)
      checkpoints: null,
      // timers are due when the recording set them, and fire as it fired them (see recordedAnswers)
      recordedTimers: RecordedTimers.fromEvents(events),
      // children are not run again: each delegation ends as the recording says its child did
      childTasks: new RecordedChildTasks(events),
      // nor are remote agents called: each remote task changes as the recording saw it change
      remoteAgents: new RecordedRemoteAgents(events),
    }),
    // the Nest logger stays whatever the process set (overriding it here would override it for everyone)
    { abortOnError: false },
  );
  const runtime = app.get(RuntimeController);
  let task_id: string;
  let progress: TaskProgress;
  try {
    ({ task_id } = await runtime.submit(
      {
        input: first.payload.input,
        budgets: first.payload.budgets,
        accept_checks: first.payload.accept_checks,
      },
      // the conversation the recording saw comes from its log, not from the session as it is now
      {
        source: 'replay',
        settings: recordedSettings,
        ...recordedTurn(events),
        ...(first.payload.ag_ui ? { ag_ui: first.payload.ag_ui } : {}),
      },
    ));
    progress = await runtime.settled(task_id);
    // Questions MCP servers asked are answered as the recording answered them; anything else a
    // person answered was allowed by the replay's policy and never waits.
    const answers = recordedAnswers(events);
    for (let answer = answers.next(progress); answer; answer = answers.next(progress)) {
      await answer(runtime, task_id);
      progress = await runtime.settled(task_id);
    }
  } finally {
    await app.close();
  }
  let replayed = await ownLog.readWholeStream(task_id);
  if (request.save) {
    // an unfinished task in the live log would be resumed there, with the live model
    if (!progress.final)
      throw new IllegalStateError(`replay of ${sourceTaskId} did not end (${progress.status}); not saved`);
    ({ events: replayed } = await options.store.append(task_id, replayed.map(asWrittenAgain), {
      expected: 'no_stream',
    }));
  }
  return { task_id, progress, events: replayed, saved: request.save === true };
}

/**
 * The recording's orchestrator was sys_util itself: its first orchestrator call was answered by
 * sys_util with no fallback to it before (a model that failed, or none configured for the role).
 */
function sysUtilOrchestrated(events: readonly RuntimeEvent[]): boolean {
  for (const e of events) {
    if (e.type === 'GUARD_TRIGGERED' && e.payload.guard === 'fallback') return false;
    if (e.type === 'MODEL_CALLED' && e.payload.role === 'orchestrator') return e.payload.model === SYS_UTIL;
  }
  return false;
}

/**
 * Where the recorded task stood in its session: queued behind another task (its turn begins as the
 * recording's SESSION_TURN_BEGAN says, see recordedAnswers), or shown the history it recorded.
 */
function recordedTurn(
  events: readonly RuntimeEvent[],
): Pick<SubmitOptions, 'queued' | 'session_history' | 'session_budget'> {
  const received = (events[0] as RuntimeEvent<'TASK_RECEIVED'>).payload;
  const queued =
    received.queued_behind !== undefined
      ? { queued: { behind: received.queued_behind, on_busy: received.on_busy ?? DEFAULT_ON_BUSY } }
      : {};
  return {
    ...queued,
    session_history: received.session_history ?? [],
    session_budget: received.session_budget ?? null,
  };
}

/** A stored event to append to another log as it is: its ids, session and time kept. */
export const asWrittenAgain = (e: RuntimeEvent): NewEvent =>
  ({
    type: e.type,
    payload: e.payload,
    event_id: e.event_id,
    causation_id: e.causation_id,
    correlation_id: e.correlation_id,
    session_id: e.session_id,
    created_at: e.created_at,
  }) as NewEvent;

export type ReplayOptions = Omit<
  RuntimeParts,
  'permissions' | 'model' | 'fallbackModels' | 'sysUtil' | 'hooks' | 'memory'
>;

/**
 * The recording's timer firings, and its answers to the questions MCP servers asked, by elicitation id in order: a form's
 * decision and content again; a secret, whose value the log never held, as random hex (the replayed
 * tool answers from the log, so no server sees it; redacted like any secret, it must match nothing).
 */
function recordedAnswers(events: readonly RuntimeEvent[]) {
  const forms = new Map<string, Array<Extract<RuntimeEvent, { type: 'PERMISSION_RESOLVED' }>['payload']>>();
  const fired = new Set<string>();
  for (const e of events) if (e.type === 'TIMER_FIRED') fired.add(e.payload.timer_id);
  // what the client answered for each call to a tool it offered
  const clientAnswers = new Map<string, ClientToolAnswer>();
  for (const e of events)
    if (e.type === 'TOOL_COMPLETED' && e.payload.request_id)
      clientAnswers.set(e.payload.call_id, { ok: true, output: e.payload.result.output });
    else if (e.type === 'TOOL_FAILED' && e.payload.request_id)
      clientAnswers.set(e.payload.call_id, { ok: false, error: e.payload.error });
  // the signal sent to each recorded wait while it stood, as it was sent (one kept before is a
  // recorded arrival, see RecordedArrivals, and the run takes it itself)
  const taken = new Map<string, EventPayload<'SIGNAL_RECEIVED'>>();
  events.forEach((e, i) => {
    const next = events[i + 1];
    if (e.type === 'SIGNAL_RECEIVED' && takenOnArrival(next)) taken.set(next.payload.wait_id, e.payload);
  });
  // the turn of a task queued behind another of its session, as it began
  const turn = events.find((e): e is RuntimeEvent<'SESSION_TURN_BEGAN'> => e.type === 'SESSION_TURN_BEGAN');
  for (const e of events)
    if (e.type === 'PERMISSION_RESOLVED' && elicitedCall(e.payload.call_id))
      forms.set(e.payload.call_id, [...(forms.get(e.payload.call_id) ?? []), e.payload]);
  return {
    next(p: TaskProgress): ((runtime: RuntimeController, taskId: string) => Promise<void>) | null {
      if (p.final) return null;
      if (p.queuedBehind !== null)
        return turn ? (runtime, taskId) => runtime.beginRecordedTurn(taskId, turn.payload) : null;
      // interrupted while it waited (see RecordedArrivals): run to its end
      if (p.interruptedBy !== null)
        return async (runtime, taskId) => {
          if (!(await runtime.runInterrupted(taskId)))
            throw new IllegalStateError(
              `replay of an interrupted task: ${taskId} could not be run to its end`,
            );
        };
      // the recording's timer fired (a replay does not wait for it)
      const timer = pendingTimer(p);
      if (timer && fired.has(timer.timer_id))
        return async (runtime, taskId) => {
          await runtime.fireTimer(taskId, { early: true });
        };
      // the signal sent to the recording's standing wait comes again
      const wait = pendingSignalWait(p);
      const signal = wait && taken.get(wait.wait_id);
      if (signal)
        return async (runtime, taskId) => {
          await runtime.sendSignal(taskId, signal);
        };
      const form = p.pendingPermission;
      if (form && elicitedCall(form.call_id)) {
        const recorded = forms.get(form.call_id)?.shift();
        if (!recorded) return null;
        return (runtime, taskId) =>
          runtime.resolvePermission(taskId, form.request_id, recorded.decision, recorded.content);
      }
      const secret = p.pendingSecret;
      if (secret && elicitedCall(secret.call_id))
        return (runtime, taskId) =>
          runtime.provideSecret(taskId, secret.request_id, randomBytes(24).toString('hex'));
      for (const asked of p.pendingClientTools.values()) {
        const answer = clientAnswers.get(asked.call_id);
        if (answer)
          return (runtime, taskId) => runtime.provideClientToolResult(taskId, asked.request_id, answer);
      }
      return null;
    },
  };
}
