/** pino-compatible subset. */
export interface ToolLogger {
  warn(obj: object, msg: string): void;
  info?(obj: object, msg: string): void;
}
