import { chmodSync, existsSync } from 'node:fs';
import { IllegalStateError, RuntimeEvent, isSystemSession } from '@runledger/contracts';
import BetterSqlite3 from 'better-sqlite3';
import { DataKey, KeyState, newDataKey, openEvents, openText, sealedTextSession } from './sealed-payload';

/**
 * The SQLite key store lives in its own file beside the database, never inside it: a backup or an
 * archive of the database then holds ciphertext only, and erasing a key rewrites a file of a few
 * pages (secure_delete, then a TRUNCATE checkpoint of its own small WAL) instead of leaving it in the
 * log's WAL until whenever the log is checkpointed.
 */
export const dataKeysPath = (databasePath: string): string => `${databasePath}.keys`;

interface KeyRow {
  session_id: string;
  key_id: string | null;
  key: Buffer | null;
  erased_at: string | null;
}

/** An append to a session whose data key was destroyed: its conversation is over. */
export const erasedSessionError = (sessionId: string): IllegalStateError =>
  new IllegalStateError(`session ${sessionId} was erased; it takes no more events`, {
    session_id: sessionId,
    erased: true,
  });

/**
 * The data keys of one database's sessions (crypto-shredding), in `<db>.keys`, on a connection of
 * its own. The file is created by the first key or erasure; until then every session reads as
 * having no key. Each connection (server, writer thread, CLI) caches what it read and drops the
 * cache when `refresh` sees another connection's commit (PRAGMA data_version), so an erasure made
 * by any process is seen by the next read or append of every other. The table is created here,
 * not by the migrations: the file is not the database they run on.
 */
export class SqliteDataKeys {
  private raw: BetterSqlite3.Database | null = null;
  private stmt: {
    get: BetterSqlite3.Statement<[string], KeyRow>;
    create: BetterSqlite3.Statement<[string, string, Buffer, string]>;
    erase: BetterSqlite3.Statement<[string, string, string]>;
    erasedCount: BetterSqlite3.Statement<[], { n: number }>;
    dataVersion: BetterSqlite3.Statement<[], number>;
  } | null = null;
  private readonly cache = new Map<string, KeyState>();
  private dataVersion = -1;
  private erasures = false;
  /** the file did not exist at the last refresh */
  private absent = false;

  constructor(
    readonly path: string,
    private readonly busyTimeoutMs = 5000,
  ) {}

  /** Re-read what other connections changed since the last call; once per read or append group. */
  refresh(): void {
    const stmt = this.open(false);
    // until the file exists every session reads as keyless, with no look at the disk per event
    this.absent = stmt === null;
    if (!stmt) return;
    const version = stmt.dataVersion.get()!;
    if (version === this.dataVersion) return;
    this.dataVersion = version;
    this.cache.clear();
    this.erasures = stmt.erasedCount.get()!.n > 0;
  }

  /** Whether any session of this database was erased (readers skip the lookup of clear events while none is). */
  anyErased(): boolean {
    return this.erasures;
  }

  /** The session's key, its tombstone, or nothing, as of the last `refresh`. */
  readonly state = (sessionId: string): KeyState => {
    if (this.cache.has(sessionId)) return this.cache.get(sessionId);
    if (this.absent) return undefined;
    const stmt = this.open(false);
    const row = stmt?.get.get(sessionId);
    const state = stateOf(row);
    this.cache.set(sessionId, state);
    return state;
  };

  /** The key to seal a session's payloads with, created (and committed) at its first use. */
  keyFor(sessionId: string): DataKey {
    const state = this.state(sessionId);
    if (state === 'erased') throw erasedSessionError(sessionId);
    if (state) return state;
    const stmt = this.open(true)!;
    this.absent = false;
    const fresh = newDataKey();
    stmt.create.run(sessionId, fresh.key_id, fresh.key, new Date().toISOString());
    // another connection may have created it first: the stored one is the key
    const stored = stateOf(stmt.get.get(sessionId));
    this.cache.set(sessionId, stored);
    if (stored === 'erased') throw erasedSessionError(sessionId);
    return stored!;
  }

  /** Refuses an append to an erased session, whether or not payloads are sealed. */
  checkWritable(sessionId: string): void {
    if (!isSystemSession(sessionId) && this.state(sessionId) === 'erased')
      throw erasedSessionError(sessionId);
  }

  /**
   * Destroys the session's key (a tombstone stays, so the session reads as erased and takes no
   * more events). Returns false when it was erased before.
   */
  erase(sessionId: string, at: string): boolean {
    const stmt = this.open(true)!;
    this.absent = false;
    const changed = stmt.erase.run(sessionId, at, at).changes > 0;
    this.cache.set(sessionId, 'erased');
    this.erasures = true;
    this.raw!.pragma('wal_checkpoint(TRUNCATE)');
    return changed;
  }

  close(): void {
    this.raw?.close();
    this.raw = null;
    this.stmt = null;
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
         )`,
      );
    } catch (err) {
      raw.close();
      throw err;
    }
    this.raw = raw;
    this.stmt = {
      get: raw.prepare('SELECT session_id, key_id, key, erased_at FROM data_keys WHERE session_id = ?'),
      create: raw.prepare(
        'INSERT INTO data_keys (session_id, key_id, key, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING',
      ),
      erase: raw.prepare(
        `INSERT INTO data_keys (session_id, key_id, key, created_at, erased_at) VALUES (?, NULL, NULL, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET key_id = NULL, key = NULL, erased_at = excluded.erased_at
         WHERE data_keys.erased_at IS NULL`,
      ),
      erasedCount: raw.prepare('SELECT count(*) AS n FROM data_keys WHERE erased_at IS NOT NULL'),
      dataVersion: raw.prepare('PRAGMA data_version').pluck() as BetterSqlite3.Statement<[], number>,
    };
    this.dataVersion = this.stmt.dataVersion.get()!;
    // what was cached while the file did not exist is stale now
    this.cache.clear();
    this.erasures = this.stmt.erasedCount.get()!.n > 0;
    return this.stmt;
  }
}

const stateOf = (row: KeyRow | undefined): KeyState => {
  if (!row) return undefined;
  if (row.erased_at !== null || !row.key || !row.key_id) return 'erased';
  return { key_id: row.key_id, key: row.key };
};

/** Events as readers get them through `keys` (none: as they are), after a refresh. */
export function openedThrough(keys: SqliteDataKeys | null, events: RuntimeEvent[]): RuntimeEvent[] {
  if (!keys) return events;
  keys.refresh();
  return openEvents(events, keys.state, keys.anyErased());
}

/** Read models' sealed copies (sealText) as readers get them through `keys` (none: as they are), after a refresh. */
export function openCopiesThrough(
  keys: SqliteDataKeys | null,
  texts: readonly (string | null)[],
): (string | null)[] {
  const sessions = texts.map((t) => (t === null ? null : sealedTextSession(t)));
  if (sessions.every((s) => s === null)) return [...texts];
  keys?.refresh();
  return texts.map((t, i) => (sessions[i] === null ? t : openText(t!, keys?.state(sessions[i]!))));
}

/** The key store beside a connection's database file, for a one-off reader (null for :memory:). */
export const dataKeysOf = (raw: BetterSqlite3.Database): SqliteDataKeys | null =>
  raw.memory
    ? null
    : new SqliteDataKeys(dataKeysPath(raw.name), Number(raw.pragma('busy_timeout', { simple: true })));
