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
  | {
      kind: 'resume';
      task_id: string | null;
      model: string | null;
      json: boolean;
      yes: boolean;
      force: boolean;
    }
  | { kind: 'resolve'; task_id: string; request_id: string; decision: PermissionDecision; json: boolean }
  | { kind: 'replay'; task_id: string; json: boolean }
  | { kind: 'fork'; task_id: string; sequence: number; model: string | null; json: boolean; yes: boolean }
  | { kind: 'cancel'; task_id: string; json: boolean }
  | { kind: 'rebuild'; json: boolean; force: boolean }
  | { kind: 'serve' }
  | { kind: 'help' };

const ALL_FLAGS = ['--yes', '--json', '--model', '--session', '--budget', '--accept', '--force'] as const;
type Flag = (typeof ALL_FLAGS)[number];
const isFlag = (a: string): a is Flag => (ALL_FLAGS as readonly string[]).includes(a);

/** The options each command takes; any other is refused, never silently ignored. */
const FLAGS: Partial<Record<string, readonly Flag[]>> = {
  run: ['--yes', '--json', '--model', '--budget', '--accept', '--session'],
  resume: ['--yes', '--json', '--model', '--force'],
  resolve: ['--json'],
  replay: ['--json'],
  fork: ['--yes', '--json', '--model'],
  cancel: ['--json'],
  rebuild: ['--json', '--force'],
  serve: [],
};

const MODEL = /^(sys_util|openai|scripted:.+)$/;

export const USAGE = `usage:
  runledger run "<input>" [--model sys_util|openai|scripted:<path>] [--yes] [--json]
                          [--budget key=value]... [--accept '<AcceptCheck JSON>']... [--session <id>]
  runledger resume [<task_id>] [--model ...] [--yes] [--json] [--force]
                                                    continue unfinished tasks from the log (refused while
                                                    another runledger process has the database open)
  runledger resolve <task_id> <request_id> allow_once|allow_always|deny|ask_always [--json]
  runledger replay <task_id> [--json]               re-run a recorded task offline, compared with its log
  runledger fork <task_id> <sequence> [--model ...] [--yes] [--json]  a new task from that event of an old one
  runledger cancel <task_id> [--json]               end a task that is running or waiting (stop reason cancelled)
  runledger rebuild [--json] [--force]              recompute task states, checkpoints and memory from the
                                                    log and name what differed (refused while another
                                                    runledger process has the database open)
  runledger serve                                   run the HTTP server
exit code: 0 only when the task completed (replay: and matched its recording); 1 it ended otherwise;
           2 bad usage; 3 it waits for a person`;

function budgetPair(text: string): [string, number] {
  const m = /^([a-z_]+)=(.+)$/.exec(text);
  if (!m || !Number.isFinite(Number(m[2])))
    throw new ValidationError(`--budget expects key=number, got ${JSON.stringify(text)}`);
  if (!(m[1] in Budgets.shape))
    throw new ValidationError(
      `--budget: unknown key ${m[1]} (one of ${Object.keys(Budgets.shape).join(', ')})`,
    );
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
  if (rest.includes('--help') || rest.includes('-h')) return { kind: 'help' };
  const allowed = command === undefined ? undefined : FLAGS[command];
  const flags = {
    yes: false,
    json: false,
    force: false,
    model: null as string | null,
    session: null as string | null,
  };
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
    const flag = a === '-y' ? '--yes' : a;
    if (allowed && isFlag(flag) && !allowed.includes(flag))
      throw new ValidationError(
        `${a} does not apply to ${command}${allowed.length ? ` (it takes ${allowed.join(', ')})` : ''}`,
      );
    if (a === '--yes' || a === '-y') flags.yes = true;
    else if (a === '--json') flags.json = true;
    else if (a === '--force') flags.force = true;
    else if (a === '--model') {
      flags.model = value();
      if (!MODEL.test(flags.model))
        throw new ValidationError(
          `--model must be sys_util, openai or scripted:<path>, got ${JSON.stringify(flags.model)}`,
        );
    } else if (a === '--session') flags.session = value();
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
          `--budget: ${parsed.error.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ')}`,
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
      if (positional.length > 1) throw new ValidationError('resume takes at most one <task_id>');
      return {
        kind: 'resume',
        task_id: positional[0] ?? null,
        model: flags.model,
        json: flags.json,
        yes: flags.yes,
        force: flags.force,
      };
    case 'resolve': {
      const [task_id, request_id, decision] = positional;
      if (
        positional.length !== 3 ||
        !task_id ||
        !request_id ||
        !(PERMISSION_DECISIONS as readonly string[]).includes(decision)
      )
        throw new ValidationError(`resolve needs <task_id> <request_id> ${PERMISSION_DECISIONS.join('|')}`);
      return {
        kind: 'resolve',
        task_id,
        request_id,
        decision: decision as PermissionDecision,
        json: flags.json,
      };
    }
    case 'replay':
      if (positional.length !== 1) throw new ValidationError('replay needs <task_id>');
      return { kind: 'replay', task_id: positional[0], json: flags.json };
    case 'fork': {
      const sequence = Number(positional[1]);
      if (positional.length !== 2 || !Number.isInteger(sequence) || sequence < 1)
        throw new ValidationError('fork needs <task_id> <sequence>');
      return {
        kind: 'fork',
        task_id: positional[0],
        sequence,
        model: flags.model,
        json: flags.json,
        yes: flags.yes,
      };
    }
    case 'cancel':
      if (positional.length !== 1) throw new ValidationError('cancel needs <task_id>');
      return { kind: 'cancel', task_id: positional[0], json: flags.json };
    case 'rebuild':
      if (positional.length > 0) throw new ValidationError('rebuild takes no arguments');
      return { kind: 'rebuild', json: flags.json, force: flags.force };
    case 'serve':
      if (positional.length > 0)
        throw new ValidationError('serve takes no arguments (configure it through the environment)');
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
