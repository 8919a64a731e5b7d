import { RuntimeEvent } from '@runledger/contracts';
import { reproducedInReplay } from './reproduced-in-replay';

/** A recorded budget stop says how long the task had run; the decision's instant is not in the log. */
const ELAPSED = /task ran \d+ ms/g;

/** Events of a task that must come out of a replay the same, minus what differs by nature: ids, times, latency. */
export function replayView(events: readonly RuntimeEvent[]): Array<{ type: string; payload: unknown }> {
  const VOLATILE = new Set([
    'call_id',
    'request_id',
    'latency_ms',
    'duration_ms',
    'backend',
    'session_id',
    'source',
    'request_hash',
    'idempotency_key',
    'forked_from',
    // a child's id follows from its parent's, and a replay is a task of its own
    'child_task_id',
    // so does the message a remote agent's delegation is sent as, and its context
    'message_id',
    'context_id',
    // CRITIC_RESULT names the scored outcome by event id; its call_id is compared
    'target_event_id',
  ]);
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object')
      return Object.fromEntries(
        Object.entries(v)
          .filter(([k]) => !VOLATILE.has(k))
          .map(([k, x]) => [k, strip(x)]),
      );
    return v;
  };
  // The critic's part (its model calls, CRITIC_RESULT and usage) is reproduced from the log and
  // compared; what a replay never writes is not (see reproducedInReplay).
  return events.filter(reproducedInReplay).map((e) => {
    // The model name of a call is the serving backend's; a replay serves it from the log.
    // So is the orchestrator model a fork asked for (TASK_RECEIVED.model).
    const unnamed =
      e.type === 'MODEL_CALLED' ||
      e.type === 'TASK_RECEIVED' ||
      (e.type === 'MODEL_RESPONDED' && e.payload.error !== null);
    // The replay's clock is the recording's event times; the instant a time budget was judged
    // lies between two of them, so the elapsed time a timeout names is not compared.
    const timed =
      e.type === 'TASK_FAILED' && e.payload.stop_reason === 'timeout'
        ? { ...e.payload, detail: e.payload.detail.replace(ELAPSED, 'task ran (elapsed) ms') }
        : e.payload;
    return { type: e.type, payload: strip(unnamed ? { ...timed, model: undefined } : timed) };
  });
}

/** Where a replay first differs from its recording, by field, both values shown. */
export interface ReplayDivergence {
  /** 1-based index into the compared events (replayView) */
  at: number;
  /** e.g. "event 7 (MODEL_CALLED) payload.role: recorded 'orchestrator', replayed 'coder'" */
  detail: string;
}

/** The first field in which the replayed events differ from the recorded ones, null when they match. */
export function replayDivergence(
  recorded: readonly RuntimeEvent[],
  replayed: readonly RuntimeEvent[],
): ReplayDivergence | null {
  const a = replayView(recorded);
  const b = replayView(replayed);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (!a[i] || !b[i])
      return {
        at: i + 1,
        detail: `event ${i + 1}: recorded ${a[i]?.type ?? 'nothing'}, replayed ${b[i]?.type ?? 'nothing'}`,
      };
    const diff = firstDifference(a[i], b[i], '');
    if (!diff) continue;
    return {
      at: i + 1,
      detail: `event ${i + 1} (${a[i].type}) ${diff.path}: recorded ${shown(diff.recorded)}, replayed ${shown(diff.replayed)}`,
    };
  }
  return null;
}

function firstDifference(
  recorded: unknown,
  replayed: unknown,
  path: string,
): { path: string; recorded: unknown; replayed: unknown } | null {
  const bothObjects =
    recorded !== null && replayed !== null && typeof recorded === 'object' && typeof replayed === 'object';
  if (bothObjects && Array.isArray(recorded) === Array.isArray(replayed)) {
    const r = recorded as Record<string, unknown>;
    const p = replayed as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(r), ...Object.keys(p)])];
    for (const key of keys) {
      const at = Array.isArray(recorded) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
      const diff = firstDifference(r[key], p[key], at);
      if (diff) return diff;
    }
    return null;
  }
  return Object.is(recorded, replayed) ? null : { path, recorded, replayed };
}

function shown(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = typeof v === 'string' ? `'${v}'` : JSON.stringify(v);
  return text.length > 200 ? `${text.slice(0, 200)}...` : text;
}

export interface ReplayMatch {
  matches: boolean;
  compared: number;
  /** 1-based index into the compared events (ids, times and latencies aside; MEMORY_WRITTEN and CHECKPOINT_SAVED left out: a replay writes neither) */
  diverged_at: number | null;
  /** the first differing field and both values, e.g. "event 7 (MODEL_CALLED) payload.role: recorded 'orchestrator', replayed 'coder'" */
  detail: string | null;
}

/** A replay must give the recording's event types, order and payloads (replayView says what is compared). */
export function compareReplay(
  recorded: readonly RuntimeEvent[],
  replayed: readonly RuntimeEvent[],
): ReplayMatch {
  const compared = Math.max(replayView(recorded).length, replayView(replayed).length);
  const divergence = replayDivergence(recorded, replayed);
  return divergence
    ? { matches: false, compared, diverged_at: divergence.at, detail: divergence.detail }
    : { matches: true, compared, diverged_at: null, detail: null };
}
