import { LoggerService } from '@nestjs/common';
import type { Level, Logger } from 'pino';

/**
 * Nest's own messages (its boot lines, an exception its handlers caught) as lines of the app's pino
 * instance, so several apps in one process (tests) keep their logs apart. Nest passes the context
 * last; it becomes the line's `context` field.
 */
export class NestLogLines implements LoggerService {
  constructor(private readonly lines: Logger) {}

  verbose(message: unknown, ...params: unknown[]): void {
    this.write('trace', message, params);
  }

  debug(message: unknown, ...params: unknown[]): void {
    this.write('debug', message, params);
  }

  log(message: unknown, ...params: unknown[]): void {
    this.write('info', message, params);
  }

  warn(message: unknown, ...params: unknown[]): void {
    this.write('warn', message, params);
  }

  error(message: unknown, ...params: unknown[]): void {
    this.write('error', message, params);
  }

  fatal(message: unknown, ...params: unknown[]): void {
    this.write('fatal', message, params);
  }

  private write(level: Level, message: unknown, params: unknown[]): void {
    if (!this.lines.isLevelEnabled(level)) return;
    const fields: Record<string, unknown> = params.length > 0 ? { context: params[params.length - 1] } : {};
    const [text, ...args] = params.slice(0, -1) as [string?, ...unknown[]];
    if (message instanceof Error) this.lines[level]({ ...fields, err: message }, text, ...args);
    else if (typeof message === 'object' && message !== null)
      this.lines[level]({ ...fields, ...message }, text, ...args);
    else if (level === 'error' && args.length === 0 && isStack(text)) {
      // Nest's exception handlers pass (message, stack, context): the stack goes with an error, not into the text
      const err = new Error(String(message));
      err.stack = text;
      this.lines.error({ ...fields, err });
    } else
      this.lines[level](
        fields,
        String(message),
        ...(text === undefined && args.length === 0 ? [] : [text]),
        ...args,
      );
  }
}

const isStack = (text: string | undefined): text is string => text !== undefined && /\n\s*at /.test(text);
