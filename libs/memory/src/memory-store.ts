import { Compilable, CompiledQuery, Insertable, Kysely, Selectable, sql } from 'kysely';
import { ERASED_VALUE, MemoryEntry, MemoryKind, MemorySource } from '@runledger/contracts';
import type { KeyOwner } from '@runledger/event-store';
import { isPostgres } from '@runledger/migrations';

export interface MemoryEntriesTable {
  id: string;
  label: number;
  text: string;
  kind: string;
  source: string;
  weight: number;
  task_id: string | null;
  session_id: string | null;
  metadata: string;
  embedding_model: string;
  embedding_dim: number;
  vector: Buffer;
  deleted: number;
  written_by: string;
  created_at: string;
  updated_at: string;
}

export interface MemoryProjectionTable {
  name: string;
  position: number;
}

export interface MemoryDatabase {
  memory_entries: MemoryEntriesTable;
  memory_projection: MemoryProjectionTable;
}

export type MemoryRow = Selectable<MemoryEntriesTable>;

export interface MemoryFilter {
  kind?: MemoryKind;
  session_id?: string;
  /** only entries written in one of these sessions; null stands for the entries written for nobody (no session) */
  sessions?: readonly (string | null)[];
  task_id?: string;
  min_weight?: number;
}

/** A stored entry: the contract plus what the projection keeps beside it. */
export interface StoredMemoryEntry extends MemoryEntry {
  label: number;
  deleted: boolean;
  written_by: string;
  created_at: string;
  updated_at: string;
}

export const vectorToBuffer = (v: Float32Array): Buffer => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
/** Copy out: a Buffer from SQLite may not be 4-byte aligned. */
export const bufferToVector = (b: Buffer | Uint8Array): Float32Array => {
  const copy = new Uint8Array(b.byteLength);
  copy.set(b);
  return new Float32Array(copy.buffer);
};

export function toEntry(row: MemoryRow): StoredMemoryEntry {
  return {
    id: row.id,
    text: row.text,
    kind: row.kind as MemoryKind,
    source: row.source as MemorySource,
    weight: row.weight,
    task_id: row.task_id,
    session_id: row.session_id,
    metadata: JSON.parse(row.metadata) as Record<string, unknown>,
    embedding_model: row.embedding_model,
    embedding_dim: row.embedding_dim,
    label: row.label,
    deleted: row.deleted === 1,
    written_by: row.written_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/**
 * How the table keeps its copies of a session's content (text, metadata, vector) at rest: sealed
 * under its owner's data key (the entry's task's stream, or its session's) when erasure is on (EventStore.sealCopy / openCopies, the checkpoints'
 * and tasks rows' codec), so after an erasure neither the table, its WAL, a backup nor a dump can
 * give them back.
 */
export interface MemoryCopies {
  sealCopy(owner: KeyOwner, text: string): Promise<string>;
  openCopies(texts: readonly (string | null)[]): Promise<(string | null)[]>;
}

const SEALED_PREFIX = Buffer.from('{"$sealed":');
const isSealedVector = (b: Buffer | Uint8Array): boolean =>
  b.byteLength > SEALED_PREFIX.length &&
  Buffer.from(b.buffer, b.byteOffset, SEALED_PREFIX.length).equals(SEALED_PREFIX);

/**
 * An erased entry's vector: a unit vector that says nothing (a zero vector has no direction for a
 * cosine index to normalise).
 */
export function erasedVector(dim: number): Buffer {
  const v = new Float32Array(Math.max(dim, 1));
  v[0] = 1;
  return vectorToBuffer(v);
}

/** The columns of a row that hold a session's content, as far as a read selected them. */
type ContentColumns = { text?: string; metadata?: string; vector?: Buffer; embedding_dim?: number };

const PROJECTION = 'memory';
const LABEL_ATTEMPTS = 20;

/** A unique-constraint failure on `label` (SQLite or PostgreSQL), not on the id. */
const isLabelConflict = (err: unknown): boolean => {
  const e = err as { code?: string; constraint?: string; message?: string };
  return (
    (e.code === '23505' && /label/.test(e.constraint ?? '')) ||
    (e.code === 'SQLITE_CONSTRAINT_UNIQUE' && /label/.test(e.message ?? ''))
  );
};
const ENTRY_COLUMNS = [
  'id',
  'label',
  'text',
  'kind',
  'source',
  'weight',
  'task_id',
  'session_id',
  'metadata',
  'embedding_model',
  'embedding_dim',
  'deleted',
  'written_by',
  'created_at',
  'updated_at',
] as const;

/**
 * A statement kysely builds and compiles once, then runs again with other values: memory's pass
 * runs the same statement for every entry, and kysely's builder and compiler cost the main thread
 * more than the statement itself (about 25 us against 10). `build` gets a marker for each value and
 * must bind each as a parameter, once. Every value is bound: one left undefined is bound as NULL,
 * not left out for the column's default as kysely's builder would, and keys not among `keys` are
 * not bound at all.
 */
class CompiledOnce<K extends string> {
  private readonly sql: string;
  private readonly order: K[];

  constructor(keys: readonly K[], build: (values: Record<K, never>) => Compilable) {
    const marker = (i: number) => `\u0000compiled-once:${i}`;
    const markers = Object.fromEntries(keys.map((k, i) => [k, marker(i)])) as Record<K, never>;
    const compiled = build(markers).compile();
    this.sql = compiled.sql;
    this.order = compiled.parameters.map((p) => {
      const i = keys.findIndex((_, j) => p === marker(j));
      if (i < 0) throw new Error(`a compiled-once statement binds a value it was not given: ${String(p)}`);
      return keys[i];
    });
    if (this.order.length !== keys.length || new Set(this.order).size !== keys.length)
      throw new Error('a compiled-once statement must bind each of its values once');
  }

  query(values: Partial<Record<K, unknown>>): CompiledQuery {
    return CompiledQuery.raw(
      this.sql,
      this.order.map((k) => values[k] ?? null),
    );
  }
}

type InsertColumn = Exclude<(typeof ENTRY_COLUMNS)[number], 'label'> | 'vector';
/** What an insert binds: every column but the label (the statement picks it), and the vector. */
const INSERT_COLUMNS: readonly InsertColumn[] = [
  ...ENTRY_COLUMNS.filter((c): c is Exclude<typeof c, 'label'> => c !== 'label'),
  'vector',
];

/** Reads and writes memory_entries and the projection checkpoint. Holds no decisions. */
export class MemoryStore {
  /**
   * Whether writes land in the order they are issued, so labels are given in
   * that order: SQLite's one writing connection (or its writer thread) runs
   * them in turn; PostgreSQL's pool does not.
   */
  readonly writesInIssueOrder: boolean;

  /** the pass's statements, compiled once */
  private readonly statements: {
    insert: CompiledOnce<InsertColumn>;
    setWeight: CompiledOnce<'id' | 'weight' | 'at'>;
  };

  /**
   * `lazyDb`: the same database, for the projection position, which may ride in the next commit;
   * `copies`: how a session's content is sealed at rest (none: stored as it is)
   */
  constructor(
    readonly db: Kysely<MemoryDatabase>,
    private readonly lazyDb: Kysely<MemoryDatabase> = db,
    private readonly copies: MemoryCopies | null = null,
  ) {
    this.writesInIssueOrder = !isPostgres(db);
    this.statements = {
      insert: new CompiledOnce(INSERT_COLUMNS, (v) =>
        db
          .insertInto('memory_entries')
          .values({ ...v, label: sql<number>`(select coalesce(max(label), -1) + 1 from memory_entries)` })
          .onConflict((oc) => oc.column('id').doNothing())
          .returning('label'),
      ),
      setWeight: new CompiledOnce(['id', 'weight', 'at'] as const, (v) =>
        db.updateTable('memory_entries').set({ weight: v.weight, updated_at: v.at }).where('id', '=', v.id),
      ),
    };
  }

  async get(id: string): Promise<StoredMemoryEntry | null> {
    const row = await this.db
      .selectFrom('memory_entries')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? toEntry((await this.opened([row]))[0]) : null;
  }

  /**
   * The rows with their content opened (one look at the key store for all): an erased session's
   * read ERASED_VALUE, `{}` and erasedVector.
   */
  private async opened<R extends ContentColumns>(rows: R[]): Promise<R[]> {
    if (!this.copies || rows.length === 0) return rows;
    const texts = rows.flatMap((r) => [
      r.text ?? null,
      r.metadata ?? null,
      r.vector && isSealedVector(r.vector) ? Buffer.from(r.vector).toString('utf8') : null,
    ]);
    const open = await this.copies.openCopies(texts);
    return rows.map((r, i) => {
      const [text, metadata, vector] = open.slice(3 * i, 3 * i + 3);
      const out = { ...r };
      if (r.text !== undefined) out.text = text ?? ERASED_VALUE;
      if (r.metadata !== undefined) out.metadata = metadata ?? '{}';
      if (texts[3 * i + 2] !== null)
        out.vector = vector === null ? erasedVector(r.embedding_dim ?? 1) : Buffer.from(vector, 'base64');
      return out;
    });
  }

  /** The row's content as it is to be stored (see MemoryCopies). */
  private async sealed<R extends ContentColumns & { session_id?: string | null; task_id?: string | null }>(
    row: R,
  ): Promise<R> {
    const session = row.session_id;
    if (!this.copies || !session) return row;
    // an entry written for a task is sealed under its stream's key, so erasing its tree shreds it
    const owner = { session_id: session, stream_id: row.task_id ?? null };
    const out = { ...row };
    if (row.text !== undefined) out.text = await this.copies.sealCopy(owner, row.text);
    if (row.metadata !== undefined && row.metadata !== '{}')
      out.metadata = await this.copies.sealCopy(owner, row.metadata);
    if (row.vector !== undefined) {
      const clear = Buffer.from(row.vector).toString('base64');
      const stored = await this.copies.sealCopy(owner, clear);
      if (stored !== clear) out.vector = Buffer.from(stored, 'utf8');
    }
    return out;
  }

  async byLabels(labels: readonly number[]): Promise<Map<number, StoredMemoryEntry>> {
    return new Map((await this.entriesIn('label', labels)).map((e) => [e.label, e]));
  }

  /** The stored entries among `ids`, by id: what `get` answers for each, in one read per 500. */
  async byIds(ids: readonly string[]): Promise<Map<string, StoredMemoryEntry>> {
    return new Map((await this.entriesIn('id', ids)).map((e) => [e.id, e]));
  }

  /** Entries whose `column` is one of `values` (without their vectors), 500 values per statement. */
  private async entriesIn(
    column: 'id' | 'label',
    values: readonly (string | number)[],
  ): Promise<StoredMemoryEntry[]> {
    const out: StoredMemoryEntry[] = [];
    for (let i = 0; i < values.length; i += 500) {
      const rows = await this.db
        .selectFrom('memory_entries')
        .select(ENTRY_COLUMNS)
        .where(sql.ref(column), 'in', values.slice(i, i + 500))
        .execute();
      for (const row of await this.opened(rows)) out.push(toEntry({ ...row, vector: Buffer.alloc(0) }));
    }
    return out;
  }

  private active(filter: MemoryFilter) {
    return this.db
      .selectFrom('memory_entries')
      .where('deleted', '=', 0)
      .$if(filter.kind !== undefined, (q) => q.where('kind', '=', filter.kind!))
      .$if(filter.session_id !== undefined, (q) => q.where('session_id', '=', filter.session_id!))
      .$if(filter.sessions !== undefined, (q) =>
        q.where((eb) => {
          const named = filter.sessions!.filter((s): s is string => s !== null);
          return eb.or([
            ...(named.length > 0 ? [eb('session_id', 'in', named)] : []),
            ...(filter.sessions!.includes(null) ? [eb('session_id', 'is', null)] : []),
          ]);
        }),
      )
      .$if(filter.task_id !== undefined, (q) => q.where('task_id', '=', filter.task_id!))
      .$if(filter.min_weight !== undefined, (q) => q.where('weight', '>=', filter.min_weight!));
  }

  async countActive(filter: MemoryFilter = {}): Promise<number> {
    const row = await this.active(filter)
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Newest first. */
  async list(filter: MemoryFilter, limit: number): Promise<StoredMemoryEntry[]> {
    const rows = await this.active(filter)
      .select(ENTRY_COLUMNS)
      .orderBy('label', 'desc')
      .limit(limit)
      .execute();
    return (await this.opened(rows)).map((r) => toEntry({ ...r, vector: Buffer.alloc(0) }));
  }

  /** Active entries matching the filter with their vectors, for an exact scan. */
  async withVectors(
    filter: MemoryFilter,
    limit: number,
  ): Promise<{ entry: StoredMemoryEntry; vector: Float32Array }[]> {
    const rows = await this.opened(await this.active(filter).selectAll().limit(limit).execute());
    return rows.map((r) => ({ entry: toEntry(r), vector: bufferToVector(r.vector) }));
  }

  /** Every row (tombstones too) in label order, a page at a time: what an index rebuild reads. */
  async *vectorPages(pageSize = 2000): AsyncGenerator<
    {
      label: number;
      vector: Float32Array;
      deleted: boolean;
      embedding_model: string;
      embedding_dim: number;
      id: string;
      text: string;
    }[]
  > {
    let after = -1;
    for (;;) {
      const rows = await this.opened(
        await this.db
          .selectFrom('memory_entries')
          .select(['id', 'label', 'text', 'vector', 'deleted', 'embedding_model', 'embedding_dim'])
          .where('label', '>', after)
          .orderBy('label')
          .limit(pageSize)
          .execute(),
      );
      if (rows.length === 0) return;
      yield rows.map((r) => ({
        id: r.id,
        text: r.text,
        label: r.label,
        vector: bufferToVector(r.vector),
        deleted: r.deleted === 1,
        embedding_model: r.embedding_model,
        embedding_dim: r.embedding_dim,
      }));
      after = rows[rows.length - 1].label;
    }
  }

  async deletedLabels(): Promise<number[]> {
    const rows = await this.db
      .selectFrom('memory_entries')
      .select('label')
      .where('deleted', '=', 1)
      .execute();
    return rows.map((r) => r.label);
  }

  async stats(): Promise<{ rows: number; max_label: number }> {
    const row = await this.db
      .selectFrom('memory_entries')
      .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.max('label').as('max')])
      .executeTakeFirstOrThrow();
    return { rows: Number(row.n), max_label: row.max === null ? -1 : Number(row.max) };
  }

  /**
   * Insert unless the id exists; the label is the next one, assigned inside the
   * statement so no transaction spans awaits (the SQLite connection is shared with the append path).
   * On PostgreSQL two instances may pick the same next label at once: the loser
   * of the unique label picks again. Returns the label it was given (RETURNING, on SQLite
   * >= 3.35 and PostgreSQL), or null when the id was already there and nothing was written.
   */
  async insertIfAbsent(row: Omit<Insertable<MemoryEntriesTable>, 'label'>): Promise<number | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        const { rows } = await this.db.executeQuery<{ label: number }>(
          this.statements.insert.query(await this.sealed(row)),
        );
        return rows.length > 0 ? Number(rows[0].label) : null;
      } catch (err) {
        if (attempt >= LABEL_ATTEMPTS || !isLabelConflict(err)) throw err;
      }
    }
  }

  /** The stored vector of an entry, null when there is no such entry. */
  async vector(id: string): Promise<Float32Array | null> {
    const row = await this.db
      .selectFrom('memory_entries')
      .select(['vector', 'embedding_dim'])
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? bufferToVector((await this.opened([row]))[0].vector) : null;
  }

  async setWeight(id: string, weight: number, at: string): Promise<void> {
    await this.db.executeQuery(this.statements.setWeight.query({ id, weight, at }));
  }

  async tombstone(id: string, at: string): Promise<void> {
    await this.db
      .updateTable('memory_entries')
      .set({ deleted: 1, updated_at: at })
      .where('id', '=', id)
      .execute();
  }

  /**
   * An erased session's entries keep their rows (ids, labels, tombstones) but not their content:
   * text, metadata and vector (those stored in clear, before erasure was on, included).
   */
  async scrubSession(sessionId: string): Promise<number> {
    const rows = await this.db
      .selectFrom('memory_entries')
      .select(['id', 'embedding_dim'])
      .where('session_id', '=', sessionId)
      .execute();
    await this.scrubRows(rows);
    return rows.length;
  }

  /** An erased task tree's entries (those written for one of `taskIds`), as scrubSession does a session's. */
  async scrubTasks(taskIds: readonly string[]): Promise<number> {
    let scrubbed = 0;
    for (let i = 0; i < taskIds.length; i += 500) {
      const rows = await this.db
        .selectFrom('memory_entries')
        .select(['id', 'embedding_dim'])
        .where('task_id', 'in', taskIds.slice(i, i + 500))
        .execute();
      await this.scrubRows(rows);
      scrubbed += rows.length;
    }
    return scrubbed;
  }

  private async scrubRows(rows: ReadonlyArray<{ id: string; embedding_dim: number }>): Promise<void> {
    for (const r of rows)
      await this.db
        .updateTable('memory_entries')
        .set({ text: ERASED_VALUE, metadata: '{}', vector: erasedVector(r.embedding_dim) })
        .where('id', '=', r.id)
        .execute();
  }

  async replaceVector(id: string, vector: Float32Array, model: string, dim: number): Promise<void> {
    const row = await this.db
      .selectFrom('memory_entries')
      .select(['session_id', 'task_id'])
      .where('id', '=', id)
      .executeTakeFirst();
    const { vector: stored } = await this.sealed({
      session_id: row?.session_id,
      task_id: row?.task_id,
      vector: vectorToBuffer(vector),
    });
    await this.db
      .updateTable('memory_entries')
      .set({ vector: stored, embedding_model: model, embedding_dim: dim })
      .where('id', '=', id)
      .execute();
  }

  async checkpoint(): Promise<number> {
    const row = await this.db
      .selectFrom('memory_projection')
      .select('position')
      .where('name', '=', PROJECTION)
      .executeTakeFirst();
    return row ? Number(row.position) : 0;
  }

  /** Never moves back: instances sharing a database each apply the log in order, the furthest one counts. */
  async setCheckpoint(position: number): Promise<void> {
    const furthest = isPostgres(this.db)
      ? sql<number>`greatest(memory_projection.position, excluded.position)`
      : sql<number>`max(memory_projection.position, excluded.position)`;
    await this.lazyDb
      .insertInto('memory_projection')
      .values({ name: PROJECTION, position })
      .onConflict((oc) => oc.column('name').doUpdateSet({ position: furthest }))
      .execute();
  }

  async clear(): Promise<void> {
    await this.db.deleteFrom('memory_entries').execute();
    await this.db.deleteFrom('memory_projection').execute();
  }
}
