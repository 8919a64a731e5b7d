import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { RuntimeLogger, parseBundle, replayBundle } from '@runledger/runtime';

/**
 * Every incident bundle committed under test/fixtures/bundles is a replay fixture: it must replay
 * offline, from the file alone, to exactly its recording. Add one with
 * `runledger bundle <task_id> test/fixtures/bundles/<name>.json` (see docs/bundles.md).
 */
export const BUNDLE_FIXTURES = join(__dirname, 'fixtures', 'bundles');

const files = readdirSync(BUNDLE_FIXTURES)
  .filter((f) => f.endsWith('.json'))
  .sort();

/** What the replayed runtime reports besides its events; a fixture that makes it report anything fails. */
class KeptLogger extends RuntimeLogger {
  readonly lines: string[] = [];
  error(_fields: Record<string, unknown>, msg: string): void {
    this.lines.push(msg);
  }
  warn(_fields: Record<string, unknown>, msg: string): void {
    this.lines.push(msg);
  }
  info(): void {}
}

describe('committed incident bundles replay to their recordings', () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('the folder holds bundles', () => {
    expect(files.length).toBeGreaterThanOrEqual(1);
  });

  it.each(files)('%s', async (file) => {
    const bundle = parseBundle(readFileSync(join(BUNDLE_FIXTURES, file), 'utf8'));
    const logger = new KeptLogger();
    const { match, replay } = await replayBundle(bundle, logger);
    expect(match.detail).toBeNull();
    expect(match).toMatchObject({ matches: true });
    expect(replay.progress.final?.stop_reason).toBe(
      bundle.outputs.find((o) => o.task_id === bundle.task_id)?.stop_reason,
    );
    expect(logger.lines).toEqual([]);
  });
});
