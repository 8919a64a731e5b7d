import { ScriptItem } from '../model/scripted-backend';

/** A JSON-protocol directive that calls `name` with `args`, as a scripted orchestrator answers it. */
export const toolDirective = (name: string, args: Record<string, unknown>): string =>
  JSON.stringify({ type: 'tool', tool: name, args });

/** A JSON-protocol directive that answers with `content`. */
export const respondDirective = (content: string): string => JSON.stringify({ type: 'respond', content });

/** A native (function-calling) reply that calls `name` with `args` under call id `id`. */
export const nativeToolCall = (id: string, name: string, args: unknown): ScriptItem => ({
  content: '',
  tool_calls: [{ id, name, arguments: JSON.stringify(args) }],
});
