import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A plan step that waits for signal `name`; its id is the signal's name. */
export const waitForSignalStep = (name: string, args: Record<string, unknown> = {}) => ({
  id: name,
  kind: 'wait_for_signal',
  args: { name, ...args },
});

/**
 * Writes the scripted model's `script.json` in `dir`: every task runs `steps` as one plan, then
 * answers `answer`. Returns the file's path, for `RUNLEDGER_MODEL=scripted:<path>`.
 */
export function writePlanScript(dir: string, steps: readonly object[], answer = 'done'): string {
  const path = join(dir, 'script.json');
  writeFileSync(
    path,
    JSON.stringify({
      orchestrator: [
        JSON.stringify({ type: 'plan', steps }),
        JSON.stringify({ type: 'respond', content: answer }),
      ],
    }),
  );
  return path;
}
