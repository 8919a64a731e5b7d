import { createHash } from 'node:crypto';
import { AcceptCheck, RuntimeEvent, WorkspaceObservation } from '@runledger/contracts';
import { EXCERPT_MAX_CHARS, findMatch } from './check-match';

/**
 * What the accept gate may look at when the log does not settle a file check
 * (a shell command wrote the file, or changed it after the last recorded
 * write). The live view reads the allowed root; a replay's view hands back
 * what the recorded ACCEPTANCE_DECIDED saw, so it never looks at the disk.
 */
export abstract class WorkspaceView {
  /** null: nothing to observe (a replay of a check the recording settled from the log) */
  abstract observe(check: AcceptCheck): WorkspaceObservation | null;
}

/** The part of ToolSandbox the live view uses: reads confined to the allowed root, symlinks resolved. */
export interface ConfinedReader {
  readFile(
    userPath: string,
    maxBytes?: number,
  ): { path: string; content: string; bytes: number; truncated: boolean };
}

/** Largest part of a file the gate reads to hash it and search it. */
export const OBSERVE_MAX_BYTES = 8 * 1024 * 1024;

/** Reads the file through the sandbox; a path that is missing, outside the root or not a file counts as missing. */
export class LiveWorkspaceView extends WorkspaceView {
  constructor(
    private readonly reader: ConfinedReader,
    private readonly maxBytes = OBSERVE_MAX_BYTES,
  ) {
    super();
  }

  observe(check: AcceptCheck): WorkspaceObservation {
    let file: ReturnType<ConfinedReader['readFile']>;
    try {
      file = this.reader.readFile(check.target, this.maxBytes);
    } catch (e) {
      return {
        source: 'workspace',
        exists: false,
        size: null,
        sha256: null,
        excerpt: null,
        note: (e as Error).message,
      };
    }
    const found = check.kind === 'content_contains' ? findMatch(file.content, check) : null;
    return {
      source: 'workspace',
      exists: true,
      size: file.bytes,
      sha256: file.truncated ? null : createHash('sha256').update(file.content, 'utf8').digest('hex'),
      excerpt: found ? found.text.slice(0, EXCERPT_MAX_CHARS) : null,
      note: file.truncated ? `only the first ${this.maxBytes} bytes were read` : null,
    };
  }
}

/** The observations a recorded task's accept gate made, per check id, in order. */
export class RecordedWorkspaceView extends WorkspaceView {
  private readonly seen = new Map<string, WorkspaceObservation[]>();

  constructor(events: readonly RuntimeEvent[]) {
    super();
    for (const e of events) {
      if (e.type !== 'ACCEPTANCE_DECIDED') continue;
      for (const r of e.payload.results)
        if (r.observed) this.seen.set(r.id, [...(this.seen.get(r.id) ?? []), r.observed]);
    }
  }

  observe(check: AcceptCheck): WorkspaceObservation | null {
    return this.seen.get(check.id)?.shift() ?? null;
  }
}
