import {
  AcceptCheck,
  Budgets,
  PERMISSION_DECISIONS,
  PermissionDecision,
  ValidationError,
} from '@runledger/contracts';

export type CliCommand =
  | {
      kind: 'run';
      input: string;
      model: string | null;
      yes: boolean;
      json: boolean;
      budgets: Budgets;
      accept: AcceptCheck[];
      session: string | null;
    }
  | { kind: 'resume'; task_id: string | null; json: boolean; yes: boolean }
  | { kind: 'resolve'; task_id: string; request_id: string; decision: PermissionDecision }
  | { kind: 'replay'; task_id: string; json: boolean }
  | { kind: 'fork'; task_id: string; sequence: number; json: boolean; yes: boolean }
  | { kind: 'serve' }
  | { kind: 'help' };

export const USAGE = `usage:
  runledger run "<input>" [--model sys_util|openai|scripted:<path>] [--yes] [--json]
                          [--budget key=value]... [--accept '<AcceptCheck JSON>']... [--session <id>]
  runledger resume [<task_id>] [--yes] [--json]     continue unfinished tasks from the log
  runledger resolve <task_id> <request_id> allow_once|allow_always|deny|ask_always
  runledger replay <task_id> [--json]               re-run a recorded task offline from its log
  runledger fork <task_id> <sequence> [--yes] [--json]  a new task continuing from that event of an old one
  runledger serve                                   run the HTTP server
exit code: 0 only when the task completed; 1 it ended otherwise; 2 bad usage; 3 it waits for a person`;

function budgetPair(text: string): [string, number] {
  const m = /^([a-z_]+)=(.+)$/.exec(text);
  if (!m || !Number.isFinite(Number(m[2])))
    throw new ValidationError(`--budget expects key=number, got ${JSON.stringify(text)}`);
  return [m[1], Number(m[2])];
}

function acceptCheck(text: string): AcceptCheck {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ValidationError(`--accept expects an AcceptCheck as JSON, got ${JSON.stringify(text)}`);
  }
  const parsed = AcceptCheck.safeParse(value);
  if (!parsed.success)
    throw new ValidationError(
      `--accept: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  return parsed.data;
}

/** argv (after the node and script names) -> a command; ValidationError on misuse. */
export function parseArgs(argv: readonly string[]): CliCommand {
  const [command, ...rest] = argv;
  const flags = { yes: false, json: false, model: null as string | null, session: null as string | null };
  const budgets: Record<string, number> = {};
  const accept: AcceptCheck[] = [];
  const positional: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i];
    const value = () => {
      const v = rest[++i];
      if (v === undefined) throw new ValidationError(`${a} needs a value`);
      return v;
    };
    if (a === '--yes' || a === '-y') flags.yes = true;
    else if (a === '--json') flags.json = true;
    else if (a === '--model') flags.model = value();
    else if (a === '--session') flags.session = value();
    else if (a === '--budget') {
      const [k, v] = budgetPair(value());
      budgets[k] = v;
    } else if (a === '--accept') accept.push(acceptCheck(value()));
    else if (a.startsWith('--')) throw new ValidationError(`unknown option ${a}`);
    else positional.push(a);
  }
  switch (command) {
    case 'run': {
      if (positional.length !== 1 || !positional[0].trim())
        throw new ValidationError('run needs exactly one input (quote it)');
      const parsed = Budgets.safeParse(budgets);
      if (!parsed.success)
        throw new ValidationError(
          `--budget: ${parsed.error.issues.map((i) => `${i.path.join('.') || i.message}: ${i.message}`).join('; ')}`,
        );
      return {
        kind: 'run',
        input: positional[0],
        model: flags.model,
        yes: flags.yes,
        json: flags.json,
        budgets: parsed.data,
        accept,
        session: flags.session,
      };
    }
    case 'resume':
      return { kind: 'resume', task_id: positional[0] ?? null, json: flags.json, yes: flags.yes };
    case 'resolve': {
      const [task_id, request_id, decision] = positional;
      if (!task_id || !request_id || !(PERMISSION_DECISIONS as readonly string[]).includes(decision))
        throw new ValidationError('resolve needs <task_id> <request_id> <decision>');
      return { kind: 'resolve', task_id, request_id, decision: decision as PermissionDecision };
    }
    case 'replay':
      if (positional.length !== 1) throw new ValidationError('replay needs <task_id>');
      return { kind: 'replay', task_id: positional[0], json: flags.json };
    case 'fork': {
      const sequence = Number(positional[1]);
      if (positional.length !== 2 || !Number.isInteger(sequence) || sequence < 1)
        throw new ValidationError('fork needs <task_id> <sequence>');
      return { kind: 'fork', task_id: positional[0], sequence, json: flags.json, yes: flags.yes };
    }
    case 'serve':
      return { kind: 'serve' };
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      return { kind: 'help' };
    default:
      throw new ValidationError(`unknown command ${command}`);
  }
}
