import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { EventRow } from '../sqlite/rows';

/** What a segment's first line says it is; a reader refuses anything else. */
export const SEGMENT_FORMAT = 'runledger-archive-segment/1';

/** One task a segment holds: where its events start and end in the global log. */
export interface SegmentTask {
  task_id: string;
  root_task_id: string;
  session_id: string;
  last_sequence: number;
  event_count: number;
  first_position: number;
  last_position: number;
}

/**
 * A batch of archived task trees: their events as the `events` table stored them (payload text,
 * schema version and position kept, so a read serves them as it served them live), and the rows of
 * derived tables that followed them out (checkpoints), to put back on a restore.
 */
export interface SegmentContent {
  segment_id: string;
  created_at: string;
  tasks: SegmentTask[];
  events: EventRow[];
  checkpoints: Record<string, unknown>[];
}

export interface EncodedSegment {
  bytes: Buffer;
  sha256: string;
}

/** The segment is not what its record says (checksum), or not a segment at all. */
export class ArchiveCorruptError extends Error {
  override readonly name = 'ArchiveCorruptError';
}

export const sha256Of = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/** gzip of JSON lines: a header (format, id, tasks), then one line per event, then one per checkpoint. */
export function encodeSegment(content: SegmentContent): EncodedSegment {
  const lines = [
    JSON.stringify({
      format: SEGMENT_FORMAT,
      segment_id: content.segment_id,
      created_at: content.created_at,
      tasks: content.tasks,
    }),
    ...content.events.map((e) => JSON.stringify({ event: e })),
    ...content.checkpoints.map((c) => JSON.stringify({ checkpoint: c })),
  ];
  const bytes = gzipSync(Buffer.from(lines.join('\n') + '\n', 'utf8'), { level: 6 });
  return { bytes, sha256: sha256Of(bytes) };
}

/** The segment's content, once its bytes match the checksum its record holds. */
export function decodeSegment(bytes: Buffer, sha256: string, segmentId: string): SegmentContent {
  const actual = sha256Of(bytes);
  if (actual !== sha256)
    throw new ArchiveCorruptError(`archive segment ${segmentId}: sha256 ${actual}, recorded ${sha256}`);
  let text: string;
  try {
    text = gunzipSync(bytes).toString('utf8');
  } catch (err) {
    throw new ArchiveCorruptError(`archive segment ${segmentId} does not decompress`, { cause: err });
  }
  const lines = text.split('\n').filter((l) => l.length > 0);
  const header = JSON.parse(lines[0] ?? '{}') as Partial<SegmentContent> & { format?: string };
  if (header.format !== SEGMENT_FORMAT || header.segment_id !== segmentId)
    throw new ArchiveCorruptError(`archive segment ${segmentId} has no ${SEGMENT_FORMAT} header for itself`);
  const content: SegmentContent = {
    segment_id: segmentId,
    created_at: header.created_at ?? '',
    tasks: header.tasks ?? [],
    events: [],
    checkpoints: [],
  };
  for (const line of lines.slice(1)) {
    const entry = JSON.parse(line) as { event?: EventRow; checkpoint?: Record<string, unknown> };
    if (entry.event) content.events.push(entry.event);
    else if (entry.checkpoint) content.checkpoints.push(entry.checkpoint);
  }
  return content;
}

/** Where a SQLite database keeps its segments: a folder beside the file. */
export const segmentFolder = (databasePath: string): string => `${databasePath}.archive`;

export const segmentFile = (folder: string, segmentId: string): string =>
  join(folder, `${segmentId}.jsonl.gz`);

/** fsync of a file or a folder (after a rename into it), by path. */
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Write a segment so that its name holds either nothing or every byte: a temporary file, fsync, rename,
 * fsync of the folder. A crash leaves at most a `.partial` file, which the next archive run removes.
 */
export function writeSegmentFile(path: string, bytes: Buffer): void {
  const partial = `${path}.partial`;
  const fd = openSync(partial, 'w', 0o600);
  try {
    writeSync(fd, bytes);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(partial, path);
  fsyncPath(dirname(path));
}

export function readSegmentFile(path: string): Buffer {
  return readFileSync(path);
}

export function removeSegmentFile(path: string): void {
  rmSync(path, { force: true });
  rmSync(`${path}.partial`, { force: true });
}
