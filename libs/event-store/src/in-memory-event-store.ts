import { NewEvent, RuntimeEvent } from '@runledger/contracts';
import {
  buildEnvelopes,
  checkExpected,
  checkLeaseHeld,
  checkOpen,
  resolveDuplicates,
  validateBatch,
} from './append-batch';
import {
  AppendOptions,
  AppendResult,
  EventStore,
  LeaseToken,
  ReadAllOptions,
  ReadStreamOptions,
  StoreHead,
} from './event-store';

/** Where the in-memory store reads a task's current lease for fencing (the in-memory LeaseStore). */
export interface CurrentLeases {
  /** the task's lease row (owner and epoch), null when it never had one */
  current(taskId: string): LeaseToken | null;
}

/**
 * Reference adapter: the semantics every other adapter must match, kept in
 * memory. Stored events are copied in and out so callers cannot mutate the log.
 * Fenced appends are checked against `leases`; without it no task has a lease,
 * so an append that carries one is refused.
 */
export class InMemoryEventStore extends EventStore {
  private readonly log: RuntimeEvent[] = [];
  private readonly streams = new Map<string, RuntimeEvent[]>();
  private readonly byId = new Map<string, RuntimeEvent>();

  constructor(private readonly leases: CurrentLeases | null = null) {
    super();
  }

  async append(taskId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    const batch = validateBatch(taskId, events, options.expected);
    const stream = this.streams.get(taskId) ?? [];
    const version = stream.length;
    const stored = batch.map((e) => this.byId.get(e.event_id));
    if (resolveDuplicates(taskId, batch, stored) === 'retry') {
      const originals = stored as RuntimeEvent[];
      return {
        nextExpectedSequence: version,
        positions: originals.map((e) => e.position),
        events: originals.map((e) => structuredClone(e)),
      };
    }
    checkLeaseHeld(taskId, options.lease, this.leases?.current(taskId) ?? null);
    checkExpected(taskId, options.expected, version);
    const head = {
      version,
      session_id: stream[0]?.session_id ?? null,
      last_type: stream[version - 1]?.type ?? null,
    };
    checkOpen(taskId, head);
    const envelopes = buildEnvelopes(taskId, batch, head, new Date().toISOString());
    const written = envelopes.map(
      (e, i) => ({ ...structuredClone(e), position: this.log.length + i + 1 }) as RuntimeEvent,
    );
    for (const e of written) {
      this.log.push(e);
      stream.push(e);
      this.byId.set(e.event_id, e);
    }
    this.streams.set(taskId, stream);
    const result = written.map((e) => structuredClone(e));
    this.emitCommitted(result);
    return { nextExpectedSequence: stream.length, positions: written.map((e) => e.position), events: result };
  }

  async readStream(taskId: string, options: ReadStreamOptions = {}): Promise<RuntimeEvent[]> {
    const stream = this.streams.get(taskId) ?? [];
    const from = stream.slice(options.after_seq ?? 0);
    return (options.limit === undefined ? from : from.slice(0, options.limit)).map((e) => structuredClone(e));
  }

  async readAll(options: ReadAllOptions = {}): Promise<RuntimeEvent[]> {
    const out: RuntimeEvent[] = [];
    const limit = options.limit ?? Infinity;
    for (let i = options.after_position ?? 0; i < this.log.length && out.length < limit; i++) {
      const e = this.log[i];
      if (options.task_id !== undefined && e.task_id !== options.task_id) continue;
      if (options.types && !options.types.includes(e.type)) continue;
      out.push(structuredClone(e));
    }
    return out;
  }

  async head(): Promise<StoreHead> {
    return { position: this.log.length, event_count: this.log.length };
  }

  async streamVersion(taskId: string): Promise<number> {
    return this.streams.get(taskId)?.length ?? 0;
  }

  async close(): Promise<void> {}
}
