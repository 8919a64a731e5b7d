import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { TempPostgres } from './postgres';

/** What an erasure check reads: every stored byte as text, and where it came from. */
export interface StoredText {
  /** SQLite: the files read; PostgreSQL: the tables */
  places: string[];
  text: string;
}

/** Bytes as text, a gzip member (an archive segment) opened. */
const opened = (raw: Buffer): string =>
  (raw[0] === 0x1f && raw[1] === 0x8b ? gunzipSync(raw) : raw).toString('latin1');

/**
 * A SQLite database's every file: the database, its WAL, its keys and memory index beside it, and
 * the archive's folder (segments opened, the catalog and its WAL).
 */
export function sqliteStoredText(db: string): StoredText {
  const archive = `${db}.archive`;
  const places = [
    ...readdirSync(dirname(db))
      .filter((f) => f.startsWith(basename(db)) && f !== basename(archive))
      .map((f) => join(dirname(db), f)),
    ...(existsSync(archive) ? readdirSync(archive).map((f) => join(archive, f)) : []),
  ];
  return { places, text: places.map((f) => opened(readFileSync(f))).join('\n') };
}

/**
 * Every row of every table of a PostgreSQL schema, as text (what a dump or a dead tuple holds), and
 * the archive's segments opened.
 */
export async function postgresStoredText(temp: TempPostgres): Promise<StoredText> {
  const pool = temp.handle.pool;
  const { rows: tables } = await pool.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables
     WHERE table_schema = $1 AND table_type = 'BASE TABLE'`,
    [temp.schema],
  );
  const dumped: string[] = [];
  for (const { name } of tables) {
    const { rows } = await pool.query<{ row: string }>(
      `SELECT t::text AS row FROM "${temp.schema}"."${name}" t`,
    );
    dumped.push(...rows.map((r) => r.row));
  }
  if (tables.some((t) => t.name === 'archive_segments')) {
    const { rows } = await pool.query<{ content: Buffer }>(
      `SELECT content FROM "${temp.schema}".archive_segments`,
    );
    dumped.push(...rows.map((r) => opened(r.content)));
  }
  return { places: tables.map((t) => t.name), text: dumped.join('\n') };
}
