import type { ToolLogger } from './tool-logger';

/** `msg (key: value, ...)` from the object's plain fields; nested ones (the sandbox status) the message already says. */
function noticeLine(obj: object, msg: string): string {
  const fields = Object.entries(obj)
    .filter(([, v]) => ['string', 'number', 'boolean'].includes(typeof v))
    .map(([k, v]) => `${k}: ${String(v).replace(/\s+/g, ' ')}`);
  return `runledger: ${msg}${fields.length ? ` (${fields.join(', ')})` : ''}`;
}

/**
 * One plain line on stderr per notice. Not process.emitWarning: that prints as a Node warning with
 * the process id and a `--trace-warnings` hint, which reads like a crash to a user (and to tests).
 */
export function stderrToolLogger(stderr: { write(text: string): unknown } = process.stderr): ToolLogger {
  return { warn: (obj, msg) => void stderr.write(`${noticeLine(obj, msg)}\n`) };
}
