import { ERASED_VALUE, TaskStatus, isTerminalStatus } from '@runledger/contracts';
import type { CopySealer } from '@runledger/event-store';
import type { TaskRow } from './schema';

/** The row's columns a person's content lives in: sealed at rest with erasure on, refolded by an erasure. */
export const PERSONAL_TASK_COLUMNS = [
  'input',
  'last_directive',
  'pending_requests',
  'stop_detail',
  'result',
  'accept_checks',
] as const satisfies ReadonlyArray<keyof TaskRow>;

type PersonalColumn = (typeof PERSONAL_TASK_COLUMNS)[number];
/** A row as this file handles it: each personal column a text or null. */
type Columns = Record<PersonalColumn, string | null>;

/** What a personal column reads as once its session's key is gone: of its own kind, like an erased payload field. */
const ERASED_COLUMN: Record<PersonalColumn, string | null> = {
  input: ERASED_VALUE,
  last_directive: null,
  pending_requests: '[]',
  stop_detail: ERASED_VALUE,
  result: ERASED_VALUE,
  accept_checks: '[]',
};

/** A value with no content (none, an empty list) is stored as it is: sealing it would hide nothing. */
const hasContent = (value: string | null): value is string => value !== null && value !== '[]';

/** Opens stored copies (EventStore.openCopies): each text in clear, or null when its key is gone. */
export type OpenCopies = (texts: readonly (string | null)[]) => Promise<(string | null)[]>;

export const openedAsStored: OpenCopies = async (texts) => [...texts];

/** The rows with their personal columns opened: one look at the key store for all of them. */
export async function openTaskRows(rows: TaskRow[], open: OpenCopies): Promise<TaskRow[]> {
  const texts = rows.flatMap((r) => PERSONAL_TASK_COLUMNS.map((c) => r[c]));
  const opened = await open(texts);
  return rows.map((r, i) => {
    const out: Columns = { ...r };
    PERSONAL_TASK_COLUMNS.forEach((c, j) => {
      const text = opened[i * PERSONAL_TASK_COLUMNS.length + j];
      out[c] = text === null && r[c] !== null ? ERASED_COLUMN[c] : text;
    });
    return out as TaskRow;
  });
}

const RECENT_ROWS = 4096;

/**
 * The tasks projection's rows as stored and as folded. With erasure on, each personal column with
 * content is sealed under its session's key (CopySealer, the events' own codec); a column whose
 * value the fold did not change keeps its stored text, so an append that changes only the status
 * neither re-encrypts nor rewrites it. The rows of unfinished tasks it wrote last are remembered in
 * clear, so the next append to the same task does not decrypt its row again; a finished task's row
 * is forgotten (only a finished session can be erased, and its content must not outlive its key here).
 */
export class TaskRowCodec {
  private readonly recent = new Map<string, { stored: TaskRow; clear: TaskRow }>();

  /** The stored row with its personal columns opened. */
  open(stored: TaskRow, copies: CopySealer | undefined): TaskRow {
    if (!copies) return stored;
    const known = this.recent.get(stored.task_id);
    if (known && PERSONAL_TASK_COLUMNS.every((c) => known.stored[c] === stored[c])) {
      const out: Columns = { ...stored };
      for (const c of PERSONAL_TASK_COLUMNS) out[c] = known.clear[c];
      return out as TaskRow;
    }
    const out: Columns = { ...stored };
    for (const c of PERSONAL_TASK_COLUMNS) {
      const value = stored[c];
      if (value !== null) out[c] = copies.openCopy(value) ?? ERASED_COLUMN[c];
    }
    return out as TaskRow;
  }

  /** `row` as it is to be stored, given the stored row before it and that row opened. */
  seal(row: TaskRow, copies: CopySealer | undefined, before?: { stored: TaskRow; clear: TaskRow }): TaskRow {
    if (!copies) return row;
    const sealed: Columns = { ...row };
    for (const c of PERSONAL_TASK_COLUMNS) {
      const value = row[c];
      if (!hasContent(value)) continue;
      sealed[c] =
        before && before.clear[c] === value
          ? before.stored[c]
          : copies.sealCopy({ session_id: row.session_id, stream_id: row.task_id }, value);
    }
    const out = sealed as TaskRow;
    this.recent.delete(row.task_id);
    if (isTerminalStatus(row.status as TaskStatus)) return out;
    if (this.recent.size >= RECENT_ROWS) this.recent.delete(this.recent.keys().next().value!);
    this.recent.set(row.task_id, { stored: out, clear: row });
    return out;
  }
}
