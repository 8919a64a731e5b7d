import { chmodSync, existsSync } from 'node:fs';
import { RuntimeEvent } from '@runledger/contracts';
import BetterSqlite3 from 'better-sqlite3';
import {
  KeyRules,
  SessionKeys,
  SessionRow,
  StreamKeys,
  StreamRow,
  sessionKeysOf,
  streamKeysOf,
} from './key-rules';
import { KeyWrap, checkKeyWrap } from './key-wrap';
import { WriteKeys } from './payload-sealer';
import {
  DataKey,
  KeyOwner,
  KeyReader,
  KeyState,
  newDataKey,
  openEvents,
  openText,
  sealedTextOwner,
} from './sealed-payload';

/**
 * The SQLite key store lives in its own file beside the database, never inside it: a backup or an
 * archive of the database then holds ciphertext only, and erasing a key rewrites a file of a few
 * pages (secure_delete, then a TRUNCATE checkpoint of its own small WAL) instead of leaving it in the
 * log's WAL until whenever the log is checkpointed.
 */
export const dataKeysPath = (databasePath: string): string => `${databasePath}.keys`;

/**
 * The data keys of one database (crypto-shredding), in `<db>.keys`, on a connection of its own: a
 * row per stream owning a key (`stream_keys`, see KeyOwner) and per session (`data_keys`: a session's
 * own key, or its tombstone once erased). The file is created by the first key or erasure; until
 * then everything reads as having no key. Each connection (server, writer thread, CLI) caches what
 * it read and drops the cache when `refresh` sees another connection's commit (PRAGMA
 * data_version), so an erasure made by any process is seen by the next read or append of every
 * other. The tables are created here, not by the migrations: the file is not the database they run on.
 */
/** Key-encryption keys by key file, given by the process that opens the database (SqliteEventStore). */
const unlocked = new Map<string, KeyWrap>();

/** The key-encryption key of the key store at `path`, for every reader of it in this process. */
export const unlockKeyStore = (path: string, wrap: KeyWrap): void => {
  unlocked.set(path, wrap);
};

/** Key files a connection of this thread opened or created: the others here know the file is there. */
const openedHere = new Set<string>();

/** Whether a connection of this thread opened or created the key file at `path`. */
export const keyFileOpenedHere = (path: string): boolean => openedHere.has(path);

export class SqliteDataKeys implements KeyReader, WriteKeys {
  private raw: BetterSqlite3.Database | null = null;
  private stmt: {
    session: BetterSqlite3.Statement<[string], SessionRow>;
    stream: BetterSqlite3.Statement<[string], StreamRow>;
    byKeyId: BetterSqlite3.Statement<[string], StreamRow>;
    createSession: BetterSqlite3.Statement<[string, string, Buffer, string]>;
    createStream: BetterSqlite3.Statement<[string, string, string, Buffer, string]>;
    eraseSession: BetterSqlite3.Statement<[string, string, string]>;
    eraseSessionStreams: BetterSqlite3.Statement<[string, string]>;
    eraseStream: BetterSqlite3.Statement<[string, string, string, string]>;
    erasedCount: BetterSqlite3.Statement<[], { n: number }>;
    dataVersion: BetterSqlite3.Statement<[], number>;
  } | null = null;
  private readonly sessions = new Map<string, SessionKeys>();
  private readonly streams = new Map<string, StreamKeys | null>();
  private readonly keyIds = new Map<string, StreamKeys | null>();
  private readonly rules = new KeyRules({
    session: (id) => this.sessionKeys(id),
    stream: (id) => this.streamKeys(id),
    byKeyId: (id) => this.keyIdKeys(id),
    create: (owner) => this.create(owner),
  });
  private dataVersion = -1;
  private erasures = false;
  /** the file did not exist at the last refresh */
  private absent = false;

  /**
   * `wrap`: the key-encryption key the data keys are stored wrapped with (by default the one
   * unlockKeyStore gave for `path`); a store written with one refuses to open without it.
   */
  constructor(
    readonly path: string,
    private readonly busyTimeoutMs = 5000,
    private readonly wrap: KeyWrap | null = unlocked.get(path) ?? null,
  ) {}

  /**
   * Re-read what other connections changed since the last call; once per read or append group.
   * `lookForFile` false: while the file does not exist, it is not looked for on disk (it is when
   * another connection of this thread opened it). A caller passes false when nothing it could read or
   * write needs the file since its last look: the file is created (by an erasure, or the first key)
   * before anything that needs it is committed to the database (an erasure's scrub and record, a
   * sealed event), so a connection whose database no other connection changed since then (its PRAGMA
   * data_version stayed) has nothing to read it for, unless a connection of the thread it works for
   * opened the file (a writer thread is told so with each group).
   */
  refresh(lookForFile = true): void {
    if (this.absent && !lookForFile && !openedHere.has(this.path)) return;
    const stmt = this.open(false);
    // until the file exists everything reads as keyless, with no look at the disk per event
    this.absent = stmt === null;
    if (!stmt) return;
    const version = stmt.dataVersion.get()!;
    if (version === this.dataVersion) return;
    this.dataVersion = version;
    this.clearCache();
    this.erasures = stmt.erasedCount.get()!.n > 0;
  }

  /** Whether anything of this database was erased (readers skip the lookup of clear events while nothing is). */
  anyErased(): boolean {
    return this.erasures;
  }

  sealedState(sessionId: string, keyId: string): KeyState {
    return this.rules.sealedState(sessionId, keyId);
  }

  erasedOwner(owner: KeyOwner): boolean {
    return this.rules.erasedOwner(owner);
  }

  /** The key to seal the owner's payloads with, created (and committed) at its first use. */
  keyFor(owner: KeyOwner): DataKey {
    return this.rules.keyFor(owner);
  }

  /** The owner's key as it stands (KeyRules.existingKey). */
  existingKey(owner: KeyOwner): KeyState {
    return this.rules.existingKey(owner);
  }

  /** Refuses an append to an erased owner, whether or not payloads are sealed. */
  checkWritable(owner: KeyOwner): void {
    this.rules.checkWritable(owner);
  }

  /** Whether the session has a key or a tombstone here (its content is sealed, or was erased). */
  knowsSession(sessionId: string): boolean {
    const session = this.sessionKeys(sessionId);
    return session.erased || session.key !== null;
  }

  /** The id of the session's own key (a store sealed one key per session), or null. */
  sessionKeyId(sessionId: string): string | null {
    return this.storedRow((stmt) => stmt.session.get(sessionId))?.key_id ?? null;
  }

  /** Whether the stream has a key or a tombstone here. */
  knowsStream(streamId: string): boolean {
    return this.streamKeys(streamId) !== null;
  }

  /**
   * Destroys the session's key and every key of its streams (tombstones stay, so the session reads
   * as erased and takes no more events). Returns false when it was erased before.
   */
  eraseSession(sessionId: string, at: string): boolean {
    const stmt = this.open(true)!;
    this.absent = false;
    const changed = this.raw!.transaction(
      () =>
        stmt.eraseSession.run(sessionId, at, at).changes +
        stmt.eraseSessionStreams.run(at, sessionId).changes,
    )();
    this.afterErasure();
    return changed > 0;
  }

  /**
   * Destroys the keys of a task tree's streams, leaving a tombstone for each (also for a stream that
   * had no key, written in clear): they read as erased and take no more events. Returns how many
   * were not erased before.
   */
  eraseStreams(sessionId: string, streamIds: readonly string[], at: string): number {
    const stmt = this.open(true)!;
    this.absent = false;
    const changed = this.raw!.transaction(() =>
      streamIds.reduce((n, id) => n + stmt.eraseStream.run(id, sessionId, at, at).changes, 0),
    )();
    this.afterErasure();
    return changed;
  }

  close(): void {
    this.raw?.close();
    this.raw = null;
    this.stmt = null;
  }

  private afterErasure(): void {
    this.clearCache();
    this.erasures = true;
    this.raw!.pragma('wal_checkpoint(TRUNCATE)');
  }

  private clearCache(): void {
    this.sessions.clear();
    this.streams.clear();
    this.keyIds.clear();
  }

  private sessionKeys(sessionId: string): SessionKeys {
    return cached(this.sessions, sessionId, () =>
      sessionKeysOf(this.unwrapped(this.storedRow((stmt) => stmt.session.get(sessionId)))),
    );
  }

  private streamKeys(streamId: string): StreamKeys | null {
    return cached(this.streams, streamId, () =>
      streamKeysOf(this.unwrapped(this.storedRow((stmt) => stmt.stream.get(streamId)))),
    );
  }

  private keyIdKeys(keyId: string): StreamKeys | null {
    return cached(this.keyIds, keyId, () =>
      streamKeysOf(this.unwrapped(this.storedRow((stmt) => stmt.byKeyId.get(keyId)))),
    );
  }

  /** A row of the key file as stored; none while the file does not exist. */
  private storedRow<R>(read: (stmt: NonNullable<SqliteDataKeys['stmt']>) => R | undefined): R | undefined {
    if (this.absent) return undefined;
    const stmt = this.open(false);
    return stmt ? read(stmt) : undefined;
  }

  /** A row as the rules read it: its key unwrapped (stored wrapped when a key-encryption key is set). */
  private unwrapped<R extends SessionRow>(row: R | undefined): R | undefined {
    if (!row?.key || !row.key_id || !this.wrap) return row;
    return { ...row, key: this.wrap.unwrap(row.key, row.key_id) };
  }

  private create(owner: KeyOwner): DataKey | 'erased' {
    const stmt = this.open(true)!;
    this.absent = false;
    const made = newDataKey();
    const fresh = this.wrap ? { ...made, key: this.wrap.wrap(made.key, made.key_id) } : made;
    const at = new Date().toISOString();
    // another connection may have created it first: the stored one is the key
    if (owner.stream_id === null) {
      stmt.createSession.run(owner.session_id, fresh.key_id, fresh.key, at);
      this.sessions.delete(owner.session_id);
      const stored = this.sessionKeys(owner.session_id);
      return stored.erased || !stored.key ? 'erased' : stored.key;
    }
    stmt.createStream.run(owner.stream_id, owner.session_id, fresh.key_id, fresh.key, at);
    this.streams.delete(owner.stream_id);
    const stored = this.streamKeys(owner.stream_id);
    return !stored || stored.erased || !stored.key ? 'erased' : stored.key;
  }

  /**
   * Refuses a store whose keys are wrapped by another key-encryption key (or by one when none is
   * set); a store of raw keys opened with one has them all wrapped now, and is marked.
   */
  private checkWrapping(raw: BetterSqlite3.Database): void {
    const mark = raw.prepare<[], { kek_id: string }>('SELECT kek_id FROM key_wrapping').get();
    checkKeyWrap(mark?.kek_id ?? null, this.wrap, this.path);
    const wrap = this.wrap;
    if (mark || !wrap) return;
    raw
      .transaction(() => {
        for (const table of ['data_keys', 'stream_keys']) {
          const rows = raw
            .prepare<[], { rowid: number; key_id: string; key: Buffer }>(
              `SELECT rowid, key_id, key FROM ${table} WHERE key IS NOT NULL AND key_id IS NOT NULL`,
            )
            .all();
          const update = raw.prepare<[Buffer, number]>(`UPDATE ${table} SET key = ? WHERE rowid = ?`);
          for (const r of rows) update.run(wrap.wrap(r.key, r.key_id), r.rowid);
        }
        raw.prepare('INSERT INTO key_wrapping (kek_id) VALUES (?)').run(wrap.id);
      })
      .immediate();
    // the raw keys' old pages: zeroed (secure_delete), and out of the WAL
    raw.pragma('wal_checkpoint(TRUNCATE)');
  }

  private open(create: boolean): SqliteDataKeys['stmt'] {
    if (this.stmt) return this.stmt;
    if (!create && !existsSync(this.path)) return null;
    const raw = new BetterSqlite3(this.path, { timeout: this.busyTimeoutMs });
    try {
      chmodSync(this.path, 0o600);
      // WAL (one sync per new key, which must be durable before the events sealed with it); an erasure
      // checkpoints with TRUNCATE, so the zeroed page replaces the key in the file and no frame keeps it
      raw.pragma('journal_mode = WAL');
      raw.pragma('synchronous = FULL');
      raw.pragma('secure_delete = ON');
      raw.exec(
        `CREATE TABLE IF NOT EXISTS data_keys (
           session_id TEXT PRIMARY KEY,
           key_id TEXT,
           key BLOB,
           created_at TEXT NOT NULL,
           erased_at TEXT
         );
         CREATE TABLE IF NOT EXISTS stream_keys (
           stream_id TEXT PRIMARY KEY,
           session_id TEXT NOT NULL,
           key_id TEXT UNIQUE,
           key BLOB,
           created_at TEXT NOT NULL,
           erased_at TEXT
         );
         CREATE INDEX IF NOT EXISTS stream_keys_session ON stream_keys (session_id);
         CREATE TABLE IF NOT EXISTS key_wrapping (kek_id TEXT NOT NULL)`,
      );
      this.checkWrapping(raw);
    } catch (err) {
      raw.close();
      throw err;
    }
    this.raw = raw;
    openedHere.add(this.path);
    this.stmt = {
      session: raw.prepare('SELECT key_id, key, erased_at FROM data_keys WHERE session_id = ?'),
      stream: raw.prepare(
        'SELECT stream_id, session_id, key_id, key, erased_at FROM stream_keys WHERE stream_id = ?',
      ),
      byKeyId: raw.prepare(
        'SELECT stream_id, session_id, key_id, key, erased_at FROM stream_keys WHERE key_id = ?',
      ),
      createSession: raw.prepare(
        'INSERT INTO data_keys (session_id, key_id, key, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING',
      ),
      createStream: raw.prepare(
        `INSERT INTO stream_keys (stream_id, session_id, key_id, key, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (stream_id) DO NOTHING`,
      ),
      eraseSession: raw.prepare(
        `INSERT INTO data_keys (session_id, key_id, key, created_at, erased_at) VALUES (?, NULL, NULL, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET key = NULL, erased_at = excluded.erased_at
         WHERE data_keys.erased_at IS NULL`,
      ),
      eraseSessionStreams: raw.prepare(
        'UPDATE stream_keys SET key = NULL, erased_at = ? WHERE session_id = ? AND erased_at IS NULL',
      ),
      eraseStream: raw.prepare(
        `INSERT INTO stream_keys (stream_id, session_id, key_id, key, created_at, erased_at) VALUES (?, ?, NULL, NULL, ?, ?)
         ON CONFLICT (stream_id) DO UPDATE SET key = NULL, erased_at = excluded.erased_at
         WHERE stream_keys.erased_at IS NULL`,
      ),
      erasedCount: raw.prepare(
        `SELECT (SELECT count(*) FROM data_keys WHERE erased_at IS NOT NULL)
              + (SELECT count(*) FROM stream_keys WHERE erased_at IS NOT NULL) AS n`,
      ),
      dataVersion: raw.prepare('PRAGMA data_version').pluck() as BetterSqlite3.Statement<[], number>,
    };
    this.dataVersion = this.stmt.dataVersion.get()!;
    // what was cached while the file did not exist is stale now
    this.clearCache();
    this.erasures = this.stmt.erasedCount.get()!.n > 0;
    return this.stmt;
  }
}

/** Events as readers get them through `keys` (none: as they are), after a refresh. */
export function openedThrough(keys: SqliteDataKeys | null, events: RuntimeEvent[]): RuntimeEvent[] {
  if (!keys) return events;
  keys.refresh();
  return openEvents(events, keys, keys.anyErased());
}

/** Read models' sealed copies (sealText) as readers get them through `keys` (none: as they are), after a refresh. */
export function openCopiesThrough(
  keys: SqliteDataKeys | null,
  texts: readonly (string | null)[],
): (string | null)[] {
  if (texts.every((t) => t === null || sealedTextOwner(t) === null)) return [...texts];
  keys?.refresh();
  return texts.map((t) => (t === null ? null : openText(t, keys)));
}

/** The key store beside a connection's database file, for a one-off reader (null for :memory:). */
export const dataKeysOf = (raw: BetterSqlite3.Database): SqliteDataKeys | null =>
  raw.memory
    ? null
    : new SqliteDataKeys(dataKeysPath(raw.name), Number(raw.pragma('busy_timeout', { simple: true })));

/** The cached value for `id`, read and kept at its first lookup (until the cache is cleared). */
function cached<V>(cache: Map<string, V>, id: string, read: () => V): V {
  if (cache.has(id)) return cache.get(id) as V;
  const value = read();
  cache.set(id, value);
  return value;
}
