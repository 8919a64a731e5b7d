import {
  EventPayload,
  MemoryKind,
  MemorySource,
  NewEvent,
  NotFoundError,
  RuntimeEvent,
  ValidationError,
  newId,
} from '@runledger/contracts';
import { EmbeddingCache } from './embedding-cache';
import { MemoryServiceOptions } from './memory-options';
import { MEMORY_SYSTEM_STREAM, MemoryProjection } from './memory-projection';
import { MemorySearch } from './memory-search';
import { MemoryFilter, StoredMemoryEntry } from './memory-store';
import {
  DEFAULT_MEMORY_POLICY,
  MemoryPolicyConfig,
  NearestEntry,
  dedupe,
  looksSecret,
} from './memory-write-policy';

const SYSTEM_SESSION = 'system';

/**
 * The session a write on the system stream is recorded under: an insert or a reinforce made for a
 * session (a memory tool's) is that session's content (its text, its metadata), so it is sealed and
 * erased with it; the rest (deletes, writes for nobody) are the system's, and carry no entry's text.
 */
const sessionOfSystemWrite = (e: NewEvent): string => {
  const p = e.payload as { op?: unknown; metadata?: { session_id?: unknown } } | undefined;
  const session = p?.op === 'delete' ? undefined : p?.metadata?.session_id;
  return typeof session === 'string' && session.length > 0 ? session : SYSTEM_SESSION;
};

/**
 * longest a decided write stays listed for its task's writer to take it (see decideWrite): the writer
 * stages it once the step's later outcome hooks are done, which may call a model (a model critic)
 */
const DECIDED_LISTED_MS = 30_000;

export interface DirectWrite {
  text: string;
  kind: MemoryKind;
  source: MemorySource;
  weight: number;
  reason: string;
  /** the task (and call) on whose behalf the entry is written, if any */
  task_id?: string | null;
  session_id?: string | null;
  metadata?: Record<string, unknown>;
}

/** A write decideWrite decided: a MEMORY_WRITTEN with its id, appended to the task's stream as it is. */
export type DecidedWrite = NewEvent & {
  type: 'MEMORY_WRITTEN';
  event_id: string;
  payload: EventPayload<'MEMORY_WRITTEN'>;
};

/**
 * Memory's writes, each a MEMORY_WRITTEN in the log: a task's writes as deduplication decides them,
 * one at a time, and the direct ones (memory tools, admin) on the system stream, applied before they return.
 */
export class MemoryWrites {
  /** decideWrite's decisions, one after the other */
  private decisions: Promise<unknown> = Promise.resolve();
  /** the listings of decideWrite's writes, until their time is up: a closing service lets them go */
  private readonly decidedListings = new Map<NodeJS.Timeout, () => void>();

  constructor(
    private readonly o: MemoryServiceOptions,
    private readonly projection: MemoryProjection,
    private readonly reads: MemorySearch,
    private readonly vectors: EmbeddingCache,
  ) {}

  /**
   * nearest() and `decide`'s write on what it found, one decision at a time in this process. The write
   * (a MEMORY_WRITTEN with its event_id, to append to the task's stream as it is) is handed over in the
   * store (EventStore.handOver) before the next decision looks, so tasks deciding side by side find each
   * other's writes rather than each storing a copy. The task's writer lists the write again under the
   * same id when it stages it, and answers for it from then on; a write no writer takes leaves the list
   * after DECIDED_LISTED_MS. `vector` is the candidate's text embedded; `taskEvents` as nearest() takes them;
   * `sessionId` the writer's session (see reachOf).
   */
  decideWrite(
    vector: Float32Array,
    kind: MemoryKind,
    taskEvents: readonly RuntimeEvent[],
    sessionId: string | null,
    decide: (nearest: NearestEntry | null) => DecidedWrite | null,
  ): Promise<DecidedWrite | null> {
    const decided = this.decisions.then(async () => {
      const write = decide(await this.reads.nearest(vector, kind, taskEvents, this.reachOf(sessionId)));
      if (write) this.listDecided(write, taskEvents[0], sessionId);
      return write;
    });
    this.decisions = decided.catch(() => undefined);
    return decided;
  }

  /** A MEMORY_WRITTEN payload for a new entry (the id is chosen here, so the writer can return it). */
  insertPayload(w: DirectWrite, sourceEventId: string | null): EventPayload<'MEMORY_WRITTEN'> {
    return {
      op: 'insert',
      entry_id: newId('mem'),
      kind: w.kind,
      text: w.text,
      weight: w.weight,
      previous_weight: null,
      source: w.source,
      source_event_id: sourceEventId,
      reason: w.reason,
      embedding_model: this.o.embedder.model,
      embedding_dim: this.o.embedder.dim,
      metadata: {
        ...w.metadata,
        ...(w.task_id ? { task_id: w.task_id } : {}),
        ...(w.session_id ? { session_id: w.session_id } : {}),
      },
    };
  }

  /** Write with no task stream to append to (memory tools, admin): the system stream, then apply. */
  async insert(w: DirectWrite): Promise<StoredMemoryEntry> {
    const payload = this.insertPayload(w, null);
    await this.appendSystem([{ type: 'MEMORY_WRITTEN', payload }]);
    const entry = await this.o.store.get(payload.entry_id);
    if (!entry) throw new Error(`memory entry ${payload.entry_id} was written but not applied`);
    return entry;
  }

  /**
   * A direct write under the same rules as the outcome hook: never a secret,
   * and a near-duplicate of a live entry of the same kind raises its weight
   * instead of storing a copy. Returns the entry written or reinforced.
   */
  async remember(
    w: DirectWrite,
    policy: MemoryPolicyConfig = DEFAULT_MEMORY_POLICY,
  ): Promise<{ op: 'insert' | 'reinforce' | 'none'; entry: StoredMemoryEntry }> {
    if (looksSecret(w.text)) throw new ValidationError('the text looks like it holds a secret; not stored');
    // an API write: it sees everything committed, applied, so the entry it finds is in the table
    await this.projection.sync();
    const nearest = await this.reads.nearestStored(
      await this.vectors.embed(w.text),
      w.kind,
      new Set(),
      this.reachOf(w.session_id ?? null),
    );
    const decision = dedupe(
      { op: 'insert', kind: w.kind, source: w.source, weight: w.weight, text: w.text, reason: w.reason },
      nearest,
      policy,
    );
    if (decision.op === 'insert') return { op: 'insert', entry: await this.insert(w) };
    const existing = (await this.o.store.get(nearest!.entry_id))!;
    if (decision.op === 'none') return { op: 'none', entry: existing };
    await this.appendSystem([
      {
        type: 'MEMORY_WRITTEN',
        payload: {
          op: 'reinforce',
          entry_id: existing.id,
          kind: existing.kind,
          weight: decision.weight,
          previous_weight: decision.previous_weight,
          source: w.source,
          source_event_id: null,
          reason: `${w.reason}: ${decision.reason}`,
          embedding_model: existing.embedding_model,
          embedding_dim: existing.embedding_dim,
          metadata: {
            ...w.metadata,
            ...(w.task_id ? { task_id: w.task_id } : {}),
            ...(w.session_id ? { session_id: w.session_id } : {}),
          },
        },
      },
    ]);
    return { op: 'reinforce', entry: (await this.o.store.get(existing.id))! };
  }

  /**
   * Tombstone an entry: a MEMORY_WRITTEN delete on the system stream, then applied. The record names
   * the entry by id, without its text: it is the system's, in clear, and must outlive the entry's session.
   */
  async delete(id: string, reason: string, actor: string | null = null): Promise<StoredMemoryEntry> {
    await this.projection.sync();
    const entry = await this.o.store.get(id);
    if (!entry || entry.deleted) throw new NotFoundError(`memory entry ${id} not found`, { id });
    await this.appendSystem([
      {
        type: 'MEMORY_WRITTEN',
        payload: {
          op: 'delete',
          entry_id: id,
          kind: entry.kind,
          weight: entry.weight,
          previous_weight: entry.weight,
          source: 'user',
          source_event_id: null,
          reason,
          embedding_model: entry.embedding_model,
          embedding_dim: entry.embedding_dim,
          metadata: actor ? { actor } : {},
        },
      },
    ]);
    return { ...entry, deleted: true };
  }

  /** Lets every listed decision go (a writer that took one over keeps its own listing). */
  close(): void {
    for (const [timer, release] of this.decidedListings) {
      clearTimeout(timer);
      release();
    }
    this.decidedListings.clear();
  }

  private listDecided(write: DecidedWrite, first: RuntimeEvent | undefined, sessionId: string | null): void {
    const event = {
      ...write,
      task_id: first?.task_id ?? '',
      session_id: sessionId ?? first?.session_id ?? '',
      sequence: 0,
      position: 0,
      correlation_id: first?.correlation_id ?? write.event_id,
      created_at: new Date().toISOString(),
    } as RuntimeEvent;
    const release = this.o.events.handOver([event]);
    const timer = setTimeout(() => {
      this.decidedListings.delete(timer);
      release();
    }, DECIDED_LISTED_MS).unref();
    this.decidedListings.set(timer, release);
  }

  /**
   * The sessions whose entries a write of `sessionId` may reinforce: every session's (undefined), or
   * with `deduplicateWithinSession` its own and those of nobody (a write for nobody: those alone), so
   * it never names another session's entry in its own log, where that session's erasure would not reach.
   */
  private reachOf(sessionId: string | null): MemoryFilter['sessions'] {
    if (!this.o.deduplicateWithinSession) return undefined;
    return sessionId ? [sessionId, null] : [null];
  }

  private async appendSystem(events: NewEvent[]): Promise<void> {
    await this.o.events.append(
      MEMORY_SYSTEM_STREAM,
      events.map((e) => ({ ...e, session_id: sessionOfSystemWrite(e) })),
      { expected: 'any' },
    );
    await this.projection.sync();
  }
}
