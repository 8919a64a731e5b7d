import { INestApplicationContext, LoggerService } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { RuntimeController } from '../control/runtime-controller';
import { RuntimeLogger } from '../runtime-logger';
import { RuntimeModule } from '../runtime.module';
import { RuntimeParts } from '../runtime-options';

/** Keeps what the runtime reports, for tests that assert on it (and quiet for those that do not). */
export class RecordingRuntimeLogger extends RuntimeLogger {
  readonly lines: Array<{ level: 'error' | 'warn' | 'info'; msg: string; fields: Record<string, unknown> }> =
    [];

  error(fields: Record<string, unknown>, msg: string): void {
    this.lines.push({ level: 'error', msg, fields });
  }

  warn(fields: Record<string, unknown>, msg: string): void {
    this.lines.push({ level: 'warn', msg, fields });
  }

  info(fields: Record<string, unknown>, msg: string): void {
    this.lines.push({ level: 'info', msg, fields });
  }
}

/** Nest's own boot lines are not what the runtime's tests look at */
const silentNestLogger: LoggerService = {
  log: () => undefined,
  error: () => undefined,
  warn: () => undefined,
};

export interface TestRuntime {
  runtime: RuntimeController;
  app: INestApplicationContext;
  logger: RuntimeLogger;
  /** stops the runtime (in-flight tasks left to resume), as an application shutdown does */
  close(): Promise<void>;
}

/** The runtime's Nest providers over the given store, tools, permissions and models, in an application context of its own. */
export async function startTestRuntime(
  parts: Omit<RuntimeParts, 'logger'> & { logger?: RuntimeLogger },
): Promise<TestRuntime> {
  const logger = parts.logger ?? new RecordingRuntimeLogger();
  const app = await Test.createTestingModule({ imports: [RuntimeModule.forParts({ ...parts, logger })] })
    .setLogger(silentNestLogger)
    .compile();
  await app.init();
  return { runtime: app.get(RuntimeController), app, logger, close: () => app.close() };
}
