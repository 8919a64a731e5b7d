import { InMemoryEventStore } from '@runledger/event-store';
import { RecordedManifestsRegistry } from '@runledger/tools';
import { ReplayResult } from '../control/runtime-controller';
import { replayTask } from '../runtime.module';
import { RuntimeLogger } from '../runtime-logger';
import { ReplayMatch, compareReplay } from '../replay/replay-view';
import { asWrittenAgain } from '../replay/replay-task';
import { IncidentBundle } from './bundle-format';

export interface BundleReplay {
  /** the bundled task replayed */
  source_task_id: string;
  replay: ReplayResult;
  match: ReplayMatch;
}

/** The bundle's log as a store of its own, every event with its recorded ids and times. */
async function storeOf(bundle: IncidentBundle): Promise<InMemoryEventStore> {
  const store = new InMemoryEventStore();
  for (const t of bundle.tasks)
    await store.append(t.task_id, t.events.map(asWrittenAgain), { expected: 'no_stream' });
  return store;
}

/**
 * Replays the bundled task offline from the bundle alone: no database, no model, no tool, no
 * network and none of this machine's configuration. The runtime is the one the bundle recorded
 * (its tools' manifests, agents, plan and delegation settings), the task's own run settings come
 * from its TASK_RECEIVED as in every replay, and each delegation ends as its recorded child did.
 * The comparison is `runledger replay`'s (compareReplay).
 */
export async function replayBundle(bundle: IncidentBundle, logger: RuntimeLogger): Promise<BundleReplay> {
  const store = await storeOf(bundle);
  const r = bundle.runtime;
  const replay = await replayTask(
    {
      store,
      tools: new RecordedManifestsRegistry(r.tools),
      logger,
      agents: r.agents,
      maxDelegationDepth: r.max_delegation_depth,
      stepConcurrency: r.step_concurrency,
      coderToolTurns: r.coder_tool_turns,
      maxRounds: r.max_rounds,
      ...(r.model_timeout_ms !== null ? { modelTimeoutMs: r.model_timeout_ms } : {}),
    },
    bundle.task_id,
  );
  return {
    source_task_id: bundle.task_id,
    replay,
    match: compareReplay(bundle.tasks[0].events, replay.events),
  };
}
