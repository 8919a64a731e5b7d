import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { RuntimeLogger, parseBundle, replayBundle } from '@runledger/runtime';

export const BUNDLE_FIXTURES = join(__dirname, '..', 'test', 'fixtures', 'bundles');

class QuietLogger extends RuntimeLogger {
  error(): void {}
  warn(): void {}
  info(): void {}
}

export interface ReplayDeterminism {
  bundles: number;
  /** bundles whose replay (run twice) differs from the recording, or from each other */
  diverged: number;
  first_divergence: string | null;
}

/** Every committed bundle replayed offline twice: each replay must match the recording. */
export async function measureReplayDeterminism(): Promise<ReplayDeterminism> {
  Logger.overrideLogger(false);
  const files = readdirSync(BUNDLE_FIXTURES).filter((f) => f.endsWith('.json'));
  let diverged = 0;
  let first: string | null = null;
  for (const file of files) {
    const bundle = parseBundle(readFileSync(join(BUNDLE_FIXTURES, file), 'utf8'));
    for (let run = 0; run < 2; run++) {
      const { match } = await replayBundle(bundle, new QuietLogger());
      if (match.matches) continue;
      diverged += 1;
      first ??= `${file}: ${match.detail}`;
      break;
    }
  }
  return {
    bundles: files.length,
    diverged: files.length === 0 ? 1 : diverged,
    first_divergence: files.length ? first : 'no bundles',
  };
}
