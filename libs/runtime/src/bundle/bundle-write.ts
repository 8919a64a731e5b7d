import { NotFoundError, RuntimeEvent, ValidationError, hashArgs } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { Mask, redactPatterns, redactSecrets, sameLengthMask } from '@runledger/tools';
import { endOf } from '../delegation/child-tasks';
import { SessionSecrets } from '../log/session-secrets';
import { BUNDLE_VERSION, BundleOutput, BundleRuntime, IncidentBundle, parseBundle } from './bundle-format';

type TreeTask = IncidentBundle['tasks'][number];

/** The task and every task it delegated to, down the tree, parents first; each with its whole stream. */
export async function taskTreeLog(
  store: Pick<EventStore, 'readWholeStream'>,
  taskId: string,
): Promise<TreeTask[]> {
  const out: TreeTask[] = [];
  const queue: Array<{ task_id: string; parent_task_id: string | null }> = [
    { task_id: taskId, parent_task_id: null },
  ];
  const seen = new Set<string>();
  for (let next = queue.shift(); next; next = queue.shift()) {
    if (seen.has(next.task_id)) continue;
    seen.add(next.task_id);
    const events = await store.readWholeStream(next.task_id);
    if (events.length === 0) {
      // a child whose start was recorded but that never got its first event (a restart in between)
      if (next.parent_task_id !== null) continue;
      throw new NotFoundError(`task ${taskId} not found`);
    }
    if (events[0].type !== 'TASK_RECEIVED') throw new NotFoundError(`stream ${next.task_id} is not a task`);
    out.push({
      ...next,
      parent_task_id: next.parent_task_id ?? events[0].payload.parent_task_id ?? null,
      events,
    });
    for (const e of events)
      if (e.type === 'CHILD_TASK_STARTED')
        queue.push({ task_id: e.payload.child_task_id, parent_task_id: next.task_id });
  }
  return out;
}

/** What is hidden from a bundle, besides the session redaction's own knowledge. */
export interface BundleScrubbing {
  /** values never to appear in it: the process's keys and tokens, the vault's values, any given by hand */
  secrets: readonly string[];
  /** every match is hidden too (configured and given patterns) */
  patterns: readonly RegExp[];
  /**
   * The session redaction with the log's secret fingerprints loaded (its key is the database's
   * secrets.key): it recognises secrets provided in the tree's sessions wherever the events print
   * them whole, even those printed before they were provided. null without the key.
   */
  sessionSecrets: SessionSecrets | null;
}

/**
 * The incident bundle of a task tree: its events, the runtime it ran under and its outputs, with
 * every secret and every pattern's match masked. Masks keep the length of what they hide, so sizes
 * the runtime derives from the text (prompt lengths, token estimates) stay as recorded and the
 * bundle replays as the log did. SECRET_PROVIDED loses its fingerprint: without the key it is of no
 * use to a reader, and it says how long the secret is.
 *
 * The result is checked by reading it back (parseBundle): a pattern that breaks an event is refused
 * here, not found by whoever opens the bundle.
 */
export function buildBundle(
  tree: readonly TreeTask[],
  runtime: BundleRuntime,
  scrubbing: BundleScrubbing,
  now: Date,
): { bundle: IncidentBundle; text: string } {
  const all = tree.flatMap((t) => t.events);
  const secrets = [
    ...new Set([...scrubbing.secrets, ...(scrubbing.sessionSecrets?.secretsIn(all) ?? [])]),
  ].filter((s) => s.length > 0);
  let masked = 0;
  const mask: Mask = (match) => {
    masked++;
    return sameLengthMask(match);
  };
  const scrub = <T>(value: T): T =>
    redactPatterns(redactSecrets(value, secrets, mask), scrubbing.patterns, mask);
  let fingerprints = 0;
  // a call's args hash is derived from its args: a masked arg gives a new one, which the answer
  // to its permission request (bound to the hash) must name too
  const rehashed = new Map<string, string>();
  const scrubbed = tree.map((t) => ({
    ...t,
    events: t.events.map((e): RuntimeEvent => {
      if (e.type === 'SECRET_PROVIDED' && e.payload.fingerprint) {
        fingerprints++;
        const { fingerprint: _dropped, ...rest } = e.payload;
        return { ...e, payload: scrub(rest) };
      }
      const payload = scrub(e.payload);
      if ((e.type === 'TOOL_CALLED' || e.type === 'TASK_AWAITING_PERMISSION') && 'args' in payload) {
        const hash = hashArgs(e.payload.tool, payload.args);
        if (hash !== e.payload.args_hash) rehashed.set(e.payload.args_hash, hash);
        return { ...e, payload: { ...payload, args_hash: hash } } as RuntimeEvent;
      }
      return { ...e, payload } as RuntimeEvent;
    }),
  }));
  const tasks = scrubbed.map((t) => ({
    ...t,
    events: t.events.map((e) =>
      e.type === 'PERMISSION_RESOLVED' && rehashed.has(e.payload.args_hash)
        ? { ...e, payload: { ...e.payload, args_hash: rehashed.get(e.payload.args_hash)! } }
        : e,
    ),
  }));
  const file = {
    runledger_bundle: BUNDLE_VERSION,
    created_at: now.toISOString(),
    task_id: tree[0].task_id,
    tasks,
    runtime: scrub(runtime),
    outputs: tasks.map((t) => outputOf(t)),
    scrubbed: {
      secrets: secrets.length,
      patterns: scrubbing.patterns.map((p) => p.source),
      masked,
      fingerprints,
    },
  };
  const text = `${JSON.stringify(file, null, 1)}\n`;
  try {
    return { bundle: parseBundle(text), text };
  } catch (e) {
    throw new ValidationError(
      `bundle: the scrubbed log no longer reads (${(e as Error).message}); a pattern matches more than secrets`,
    );
  }
}

function outputOf(t: TreeTask): BundleOutput {
  const last = t.events[t.events.length - 1];
  if (last.type !== 'TASK_COMPLETED' && last.type !== 'TASK_FAILED' && last.type !== 'TASK_CANCELLED')
    return { task_id: t.task_id, status: null, stop_reason: null, result: null };
  const end = endOf(last);
  return { task_id: t.task_id, status: end.status, stop_reason: end.stop_reason, result: end.result };
}
