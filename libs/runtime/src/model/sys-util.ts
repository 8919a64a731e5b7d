import { ExecutionDirective, PlanStep, Role } from '@runledger/contracts';
import {
  HistoryItem,
  ModelBackend,
  ModelRequest,
  ModelResponse,
  PromptView,
  zeroUsage,
} from './model-backend';

import { SYS_UTIL } from './sys-util-name';

export { SYS_UTIL };
/** finish_reason of a sys_util answer that did not understand its input (the help text) */
export const NOT_UNDERSTOOD = 'not_understood';

/** What sys_util understands; opened by why no model answers: none configured, or the one configured failed. */
export const sysUtilHelp = (fallbackReason?: string): string =>
  [
    fallbackReason
      ? `The model could not answer (${fallbackReason}), so I only understand these commands:`
      : 'No model is configured, so I only understand these commands:',
    ...HELP_COMMANDS,
  ].join('\n');

const HELP_COMMANDS = [
  '  run <command>  (or  $ <command>)   run a shell command',
  '  read <path>                          read a file',
  '  write <path>: <text>                 write a file',
  '  remember <text> / recall <query>     store / search memory',
  '  A then B                             do A, then B',
  'To use a model, set RUNLEDGER_MODEL=openai with OPENAI_BASE_URL, OPENAI_API_KEY and RUNLEDGER_MODEL_ORCHESTRATOR.',
];

export const SYS_UTIL_HELP = sysUtilHelp();

type Intent = { tool: string; args: Record<string, unknown> };

function parseIntent(text: string): Intent | null {
  const t = text.trim();
  let m: RegExpExecArray | null;
  if ((m = /^(?:run|\$)\s+([\s\S]+)$/i.exec(t)))
    return { tool: 'shell_exec', args: { command: m[1].trim() } };
  if ((m = /^read\s+(\S[\s\S]*)$/i.exec(t))) return { tool: 'file_read', args: { path: m[1].trim() } };
  if ((m = /^write\s+([^:\s][^:]*):\s?([\s\S]*)$/i.exec(t)))
    return { tool: 'file_write', args: { path: m[1].trim(), content: m[2] } };
  if ((m = /^remember\s+([\s\S]+)$/i.exec(t))) return { tool: 'memory_insert', args: { text: m[1].trim() } };
  if ((m = /^recall\s+([\s\S]+)$/i.exec(t))) return { tool: 'memory_search', args: { query: m[1].trim() } };
  return null;
}

export interface SysUtilDecision {
  directive: ExecutionDirective;
  understood: boolean;
}

/** What the last round came to, for the closing answer. */
function summarise(last: HistoryItem): SysUtilDecision {
  const body = last.results.join('\n');
  return last.ok
    ? { directive: { type: 'respond', content: body || 'Done.' }, understood: true }
    : { directive: { type: 'fail', reason: body || 'the last step failed' }, understood: true };
}

/**
 * The model-free orchestrator: a deterministic intent parser. Once the
 * history shows the results of what it asked for, it answers with them, so a
 * one-command task ends in two rounds.
 */
export function sysUtilDecide(view: PromptView): SysUtilDecision {
  const last = view.history[view.history.length - 1];
  if (last && last.results.length > 0) return summarise(last);
  const parts = view.input.split(/\s+then\s+/i).filter((p) => p.trim().length > 0);
  const intents = parts.map(parseIntent);
  if (parts.length === 0 || intents.some((i) => i === null))
    return { directive: { type: 'respond', content: sysUtilHelp(view.fallback_reason) }, understood: false };
  const found = intents as Intent[];
  if (found.length === 1)
    return { directive: { type: 'tool', tool: found[0].tool, args: found[0].args }, understood: true };
  const steps: PlanStep[] = found.map((intent, i) => ({
    id: `s${i + 1}`,
    kind: 'tool',
    tool: intent.tool,
    args: intent.args,
    description: parts[i].trim(),
    requires_confirmation: false,
    depends_on: i === 0 ? [] : [`s${i}`],
  }));
  return { directive: { type: 'plan', steps }, understood: true };
}

/** sys_util behind the ModelBackend port: answers the orchestrator role with a directive as JSON. */
export class SysUtilBackend extends ModelBackend {
  readonly backend = SYS_UTIL;

  override get answersInProcess(): boolean {
    return true;
  }

  modelFor(role: Role): string | null {
    return role === 'orchestrator' ? SYS_UTIL : null;
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const view = request.view ?? {
      input: [...request.messages].reverse().find((m) => m.role === 'user')?.content ?? '',
      history: [],
    };
    const decision = sysUtilDecide(view);
    return {
      content: JSON.stringify(decision.directive),
      usage: zeroUsage(),
      model: SYS_UTIL,
      finish_reason: decision.understood ? 'stop' : NOT_UNDERSTOOD,
    };
  }
}
