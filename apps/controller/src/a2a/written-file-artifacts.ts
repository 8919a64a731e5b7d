import { Artifact } from '@a2a-js/sdk';
import { EventStore } from '@runledger/event-store';
import { TaskTree, filesWritten } from '@runledger/runtime';
import { ToolSandbox } from '@runledger/tools';
import { WrittenFile, fileArtifact } from './a2a-mapping';

/** How many written files a task shows as artifacts (the first written), and how much of each. */
export const FILE_ARTIFACTS_MAX = 50;
const FILE_ARTIFACT_MAX_BYTES = 1024 * 1024;

/** A written file through the sandbox (confined to the allowed root, symlinks resolved); null when it is gone. */
export function readWritten(sandbox: ToolSandbox, path: string): WrittenFile | null {
  try {
    const f = sandbox.readFile(path, FILE_ARTIFACT_MAX_BYTES);
    // what did not decode as UTF-8 text (or holds NUL bytes) is a binary file
    const binary = f.content.includes('\uFFFD') || f.content.includes('\u0000');
    return { path, text: binary ? null : f.content, bytes: f.bytes, truncated: f.truncated };
  } catch {
    return null;
  }
}

/**
 * The files a task and the tasks it delegated to here wrote (recorded write calls), as artifacts
 * of the files as they are in the allowed root now; one deleted since is left out. GetTask, the
 * streams and the final push notification show the same list.
 */
export class WrittenFileArtifacts {
  constructor(
    private readonly store: EventStore,
    private readonly tree: TaskTree,
    private readonly readFile: (path: string) => WrittenFile | null,
  ) {}

  async of(taskId: string): Promise<Artifact[]> {
    const paths: string[] = [];
    for (let level = [taskId]; level.length > 0 && paths.length < FILE_ARTIFACTS_MAX;) {
      const next: string[] = [];
      for (const id of level) {
        for (const path of filesWritten(await this.store.readWholeStream(id)))
          if (!paths.includes(path)) paths.push(path);
        next.push(...(await this.tree.children(id)).filter((c) => !c.remote).map((c) => c.task_id));
      }
      level = next;
    }
    return paths
      .slice(0, FILE_ARTIFACTS_MAX)
      .map((path) => this.readFile(path))
      .filter((f): f is WrittenFile => f !== null)
      .map((f) => fileArtifact(taskId, f));
  }
}
