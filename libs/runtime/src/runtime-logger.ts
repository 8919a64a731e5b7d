/**
 * Where the runtime reports what it cannot hand to a caller (a task that
 * stopped on an unexpected error, a marker not written). Fields are
 * structured (`task_id`, `err`); the app provides its pino logger, which
 * has this shape.
 */
export abstract class RuntimeLogger {
  abstract error(fields: Record<string, unknown>, msg: string): void;
  abstract warn(fields: Record<string, unknown>, msg: string): void;
  abstract info(fields: Record<string, unknown>, msg: string): void;
}

/** For the CLI and tools run without a configured logger: one line on stderr per report. */
export class StderrRuntimeLogger extends RuntimeLogger {
  error(fields: Record<string, unknown>, msg: string): void {
    this.write(msg, fields);
  }

  warn(fields: Record<string, unknown>, msg: string): void {
    this.write(msg, fields);
  }

  info(): void {
    // progress is the event log's to tell; stderr only carries what went wrong
  }

  private write(msg: string, fields: Record<string, unknown>): void {
    const { err, task_id } = fields;
    const task = typeof task_id === 'string' ? ` (${task_id})` : '';
    const cause = err ? `: ${err instanceof Error ? err.message : String(err)}` : '';
    process.stderr.write(`runledger: ${msg}${task}${cause}\n`);
  }
}
