import { Argument, Command, CommanderError, Option } from 'commander';
import {
  ON_BUSY_STRATEGIES,
  OnBusy,
  AcceptCheck,
  Budgets,
  PERMISSION_DECISIONS,
  PermissionDecision,
  TASK_STATUSES,
  TaskStatus,
  SessionBudgetSetting,
  SCHEDULE_CATCH_UPS,
  SCHEDULE_OVERLAPS,
  ScheduleSpec,
  SignalName,
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
      /** --write: a person allows the task to change things (round policy) */
      write?: true;
      /** --on-busy: what happens when a task of the session is unfinished (absent: the session's strategy) */
      on_busy?: OnBusy;
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
  | { kind: 'replay'; task_id: string; json: boolean; save: boolean }
  /** replay --bundle: the bundled task, offline, from the file alone */
  | { kind: 'replay_bundle'; file: string; json: boolean }
  | { kind: 'bundle'; task_id: string; file: string; redact: string[]; json: boolean }
  | { kind: 'fork'; task_id: string; sequence: number; model: string | null; json: boolean; yes: boolean }
  | { kind: 'cancel'; task_id: string; json: boolean }
  /** set (either limit given) or show a session's budget across its tasks */
  | { kind: 'session_budget'; session_id: string; set: SessionBudgetSetting | null; json: boolean }
  | { kind: 'tasks'; status: TaskStatus | null; session: string | null; limit: number; json: boolean }
  | { kind: 'events'; task_id: string; follow: boolean; json: boolean }
  | {
      kind: 'signal';
      task_id: string;
      name: string;
      payload: unknown;
      signal_id: string | null;
      json: boolean;
      yes: boolean;
    }
  | { kind: 'schedules'; action: 'list'; json: boolean }
  | {
      kind: 'schedules';
      action: 'get' | 'pause' | 'resume' | 'delete';
      schedule_id: string;
      json: boolean;
    }
  | { kind: 'schedules'; action: 'create'; spec: ScheduleSpec; json: boolean }
  | { kind: 'rebuild'; json: boolean; force: boolean }
  | { kind: 'backup'; file: string; json: boolean }
  | { kind: 'verify'; target: string; json: boolean }
  | { kind: 'archive'; older_than: string | null; dry_run: boolean; json: boolean }
  | { kind: 'restore'; id: string; json: boolean }
  | { kind: 'vacuum'; json: boolean }
  | { kind: 'erase'; session_id: string; json: boolean }
  | { kind: 'erase-tree'; task_id: string; json: boolean }
  | { kind: 'serve' }
  | { kind: 'mcp_list'; json: boolean }
  /** `--help` anywhere, `help [command]` or no command at all: `text` is the help to print on stdout */
  | { kind: 'help'; text: string };

const MODEL = /^(sys_util|openai|scripted:.+)$/;

const EXIT_CODES = `
Output:
  The answer (the task's final result; rebuild's report; replay's verdict) goes to stdout, progress,
  questions and errors to stderr: \`runledger run "..." --yes > answer.txt\` keeps only the answer.
  With --json every event, then a summary, is one JSON line on stdout (machine output).
  Colour only when stderr is a terminal and NO_COLOR is not set.

Exit codes:
  0  the task completed (replay: and matched its recording)
  1  it ended otherwise
  2  bad usage
  3  it waits for a person (no terminal to ask) or for a signal`;

function onBusy(text: string, session: string | undefined): OnBusy {
  const parsed = OnBusy.safeParse(text);
  if (!parsed.success)
    throw new ValidationError(
      `--on-busy expects one of ${ON_BUSY_STRATEGIES.join(', ')}, got ${JSON.stringify(text)}`,
    );
  if (session === undefined)
    throw new ValidationError('--on-busy needs --session (a new session is never busy)');
  return parsed.data;
}

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

function budgets(pairs: readonly string[]): Budgets {
  const parsed = Budgets.safeParse(Object.fromEntries(pairs.map(budgetPair)));
  if (!parsed.success)
    throw new ValidationError(
      `--budget: ${parsed.error.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message)).join('; ')}`,
    );
  return parsed.data;
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

function model(value: string | undefined): string | null {
  if (value === undefined) return null;
  if (!MODEL.test(value))
    throw new ValidationError(
      `--model must be sys_util, openai or scripted:<path>, got ${JSON.stringify(value)}`,
    );
  return value;
}

/** Options several commands share, one definition each so their help reads the same everywhere. */
const option = {
  yes: () =>
    new Option('-y, --yes', 'answer every permission question with allow_once (hard stops stay stops)'),
  json: () => new Option('--json', 'print every event and a summary as JSON lines on stdout'),
  model: () =>
    new Option('--model <model>', 'sys_util, openai or scripted:<path> (default: RUNLEDGER_MODEL)'),
  force: (description: string) => new Option('--force', description),
};

const collect = (value: string, previous: string[] = []) => [...previous, value];

interface Flags {
  yes?: boolean;
  json?: boolean;
  force?: boolean;
  save?: boolean;
  bundle?: string;
  redact?: string[];
  model?: string;
  session?: string;
  write?: boolean;
  onBusy?: string;
  budget?: string[];
  accept?: string[];
  status?: TaskStatus;
  limit?: string;
  follow?: boolean;
  id?: string;
  maxTokens?: string;
  maxCostUsd?: string;
  name?: string;
  timeZone?: string;
  overlap?: string;
  catchUp?: string;
  task?: string;
}

/** `--limit`: a whole number from 1 to 500 */
function listLimit(text: string | undefined): number {
  if (text === undefined) return 20;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > 500)
    throw new ValidationError(`--limit must be a whole number from 1 to 500, got ${JSON.stringify(text)}`);
  return n;
}

/** The commands, their arguments and options; each action turns what commander parsed into a CliCommand. */
function buildProgram(done: (command: CliCommand) => void): Command {
  const program = new Command('runledger')
    .description('Run, watch, resume, replay and fork Runledger tasks from the command line.')
    .usage('<command> [options]')
    .helpCommand('help [command]', 'show the help of a command')
    .addHelpText('after', EXIT_CODES)
    .showSuggestionAfterError(true);

  program
    .command('run')
    .description('submit a task and follow it to its end')
    .argument('<input>', 'what to do (quote it)')
    .addOption(option.model())
    .addOption(option.yes())
    .addOption(option.json())
    .option(
      '--budget <key=value>',
      `a budget, repeatable (${Object.keys(Budgets.shape).join(', ')})`,
      collect,
    )
    .option('--accept <json>', 'an AcceptCheck as JSON, repeatable', collect)
    .option('--session <id>', 'continue the conversation of that session')
    .option(
      '--on-busy <strategy>',
      `when a task of the session is unfinished: ${ON_BUSY_STRATEGIES.join(', ')} (default: the session's, else enqueue)`,
    )
    .option(
      '--write',
      'allow the task to change things whatever its input says (round policy: allow_mutation)',
    )
    .action((input: string, f: Flags) => {
      if (!input.trim()) throw new ValidationError('run needs a non-empty input (quote it)');
      done({
        kind: 'run',
        input,
        model: model(f.model),
        yes: Boolean(f.yes),
        json: Boolean(f.json),
        budgets: budgets(f.budget ?? []),
        accept: (f.accept ?? []).map(acceptCheck),
        session: f.session ?? null,
        ...(f.write ? { write: true as const } : {}),
        ...(f.onBusy !== undefined ? { on_busy: onBusy(f.onBusy, f.session) } : {}),
      });
    });

  program
    .command('resume')
    .summary('continue unfinished tasks from the log')
    .description(
      'Continue every unfinished task that no other runledger process runs (its lease expired, or it never had one), following each to its end (or until it waits for a person).',
    )
    .argument('[task_id]', 'follow this task first (every unfinished task is resumed)')
    .addOption(option.model())
    .addOption(option.yes())
    .addOption(option.json())
    .addOption(
      option.force(
        'take the tasks over even from a live runledger process (its lease is stolen: it can write no more to them)',
      ),
    )
    .action((taskId: string | undefined, f: Flags) =>
      done({
        kind: 'resume',
        task_id: taskId ?? null,
        model: model(f.model),
        json: Boolean(f.json),
        yes: Boolean(f.yes),
        force: Boolean(f.force),
      }),
    );

  program
    .command('resolve')
    .description('answer a pending permission request, then follow the task')
    .argument('<task_id>')
    .argument('<request_id>')
    .addArgument(new Argument('<decision>').choices(PERMISSION_DECISIONS))
    .addOption(option.json())
    .action((taskId: string, requestId: string, decision: PermissionDecision, f: Flags) =>
      done({ kind: 'resolve', task_id: taskId, request_id: requestId, decision, json: Boolean(f.json) }),
    );

  program
    .command('replay')
    .description('re-run a recorded task offline and compare it with its log')
    .argument('[task_id]', 'a task of the database (or give --bundle)')
    .addOption(option.json())
    .addOption(
      new Option(
        '--save',
        'write the replayed task to the log (by default a replay leaves the log as it was)',
      ),
    )
    .addOption(
      new Option(
        '--bundle <file>',
        'replay the task of an incident bundle (runledger bundle) from the file alone: no database, model or network',
      ),
    )
    .action((taskId: string | undefined, f: Flags) => {
      if (f.bundle !== undefined) {
        if (taskId !== undefined)
          throw new ValidationError('replay: give a <task_id> or --bundle <file>, not both');
        if (f.save)
          throw new ValidationError('replay: --save writes to a database; a --bundle replay has none');
        return done({ kind: 'replay_bundle', file: f.bundle, json: Boolean(f.json) });
      }
      if (taskId === undefined) throw new ValidationError('replay: give a <task_id> or --bundle <file>');
      done({ kind: 'replay', task_id: taskId, json: Boolean(f.json), save: Boolean(f.save) });
    });

  program
    .command('bundle')
    .summary('write a task tree to one file, secrets scrubbed, for replay elsewhere')
    .description(
      'Write the incident bundle of a task and the tasks it delegated to: their events, the runtime settings they ran under and their outputs, with secrets (provided ones, the keys and tokens of this installation) and patterns (built-in credential shapes, RUNLEDGER_BUNDLE_REDACT, --redact) masked. `runledger replay --bundle <file>` replays it on any machine. The file must not exist yet.',
    )
    .argument('<task_id>')
    .argument('<file>', 'where the bundle goes (a new file)')
    .option('--redact <regex>', 'mask every match of this regular expression too, repeatable', collect)
    .addOption(new Option('--json', 'print the result as one JSON line on stdout'))
    .action((taskId: string, file: string, f: Flags) =>
      done({ kind: 'bundle', task_id: taskId, file, redact: f.redact ?? [], json: Boolean(f.json) }),
    );

  program
    .command('fork')
    .description('a new task from an event of an old one, followed to its end')
    .argument('<task_id>')
    .argument('<sequence>', 'the event to start from (its sequence, 1 or more)')
    .addOption(option.model())
    .addOption(option.yes())
    .addOption(option.json())
    .action((taskId: string, sequenceText: string, f: Flags) => {
      const sequence = Number(sequenceText);
      if (!/^\d+$/.test(sequenceText) || sequence < 1)
        throw new ValidationError(
          `fork: <sequence> must be a whole number from 1, got ${JSON.stringify(sequenceText)}`,
        );
      done({
        kind: 'fork',
        task_id: taskId,
        sequence,
        model: model(f.model),
        json: Boolean(f.json),
        yes: Boolean(f.yes),
      });
    });

  program
    .command('cancel')
    .description('end a task that is running or waiting (stop reason cancelled)')
    .argument('<task_id>')
    .addOption(option.json())
    .action((taskId: string, f: Flags) => done({ kind: 'cancel', task_id: taskId, json: Boolean(f.json) }));

  program
    .command('session-budget')
    .description(
      "set a session's token and cost budget across its tasks (tasks received from now on run under it), or show it",
    )
    .argument('<session_id>')
    .option('--max-tokens <n>', 'the most tokens all the tasks of the session may use')
    .option('--max-cost-usd <usd>', 'the most all the tasks of the session may cost')
    .addOption(option.json())
    .action((sessionId: string, f: Flags) => {
      const given = { max_tokens: f.maxTokens, max_cost_usd: f.maxCostUsd };
      const asked = Object.fromEntries(
        Object.entries(given)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => [k, Number(v)]),
      );
      const set = Object.keys(asked).length ? SessionBudgetSetting.safeParse(asked) : null;
      if (set && !set.success)
        throw new ValidationError(
          `session-budget: ${set.error.issues.map((i) => `--${String(i.path[0]).replace(/_/g, '-')} ${i.message}`).join('; ')}`,
        );
      done({
        kind: 'session_budget',
        session_id: sessionId,
        set: set ? set.data : null,
        json: Boolean(f.json),
      });
    });

  program
    .command('tasks')
    .description('list tasks, newest first: id, status, stop reason, when, input')
    .addOption(new Option('--status <status>', 'only tasks in this status').choices(TASK_STATUSES))
    .option('--session <id>', 'only the tasks of this session')
    .option('--limit <n>', 'at most this many (1 to 500, default 20)')
    .addOption(new Option('--json', 'print the page as one JSON line on stdout'))
    .action((f: Flags) =>
      done({
        kind: 'tasks',
        status: f.status ?? null,
        session: f.session ?? null,
        limit: listLimit(f.limit),
        json: Boolean(f.json),
      }),
    );

  program
    .command('events')
    .description("print a task's events in order, one line each")
    .argument('<task_id>')
    .option('--follow', 'keep printing its events as they are written, until its final event')
    .addOption(new Option('--json', 'print every event as one JSON line on stdout'))
    .action((taskId: string, f: Flags) =>
      done({ kind: 'events', task_id: taskId, follow: Boolean(f.follow), json: Boolean(f.json) }),
    );

  program
    .command('signal')
    .description(
      'send a signal to a task (kept until a wait_for_signal of its name takes it); a task it wakes is followed',
    )
    .argument('<task_id>')
    .argument('<name>')
    .argument('[payload]', 'the payload as JSON (default: null)')
    .addOption(new Option('--id <signal_id>', "the signal's id: sent again with it, it is recorded once"))
    .addOption(option.yes())
    .addOption(option.json())
    .action((taskId: string, name: string, payloadText: string | undefined, f: Flags) => {
      const signalName = SignalName.safeParse(name);
      if (!signalName.success)
        throw new ValidationError(`signal: <name> ${signalName.error.issues[0].message}`);
      let payload: unknown = null;
      if (payloadText !== undefined)
        try {
          payload = JSON.parse(payloadText);
        } catch {
          throw new ValidationError(`signal: [payload] must be JSON, got ${JSON.stringify(payloadText)}`);
        }
      done({
        kind: 'signal',
        task_id: taskId,
        name,
        payload,
        signal_id: typeof f.id === 'string' ? f.id : null,
        json: Boolean(f.json),
        yes: Boolean(f.yes),
      });
    });

  const schedules = program
    .command('schedules')
    .description('the schedules: cron slots that submit tasks while a server runs (runledger serve)');
  schedules
    .command('list')
    .description('every schedule: id, state, cron and time zone, next slot, latest firing, name or input')
    .addOption(new Option('--json', 'print the schedules as one JSON line on stdout'))
    .action((f: Flags) => done({ kind: 'schedules', action: 'list', json: Boolean(f.json) }));
  schedules
    .command('create')
    .description(
      'create a schedule: each slot of <cron> (5 fields, or 6 with seconds first) in its time zone submits a task of <input> ({{slot}}, {{date}}, {{time}}, {{schedule_id}} filled in)',
    )
    .argument('<cron>', 'the cron expression (quote it), e.g. "0 9 * * mon-fri"')
    .argument('<input>', "what each slot's task is asked (quote it)")
    .option('--time-zone <zone>', 'the IANA time zone its slots are read in (default UTC)')
    .option('--name <name>', 'a name to know it by')
    .option('--session <id>', 'the session its tasks join')
    .option(
      '--budget <key=value>',
      `a budget of each task, repeatable (${Object.keys(Budgets.shape).join(', ')})`,
      collect,
    )
    .addOption(
      new Option('--overlap <policy>', 'a slot while the previous task is unfinished (default skip)').choices(
        SCHEDULE_OVERLAPS,
      ),
    )
    .addOption(
      new Option('--catch-up <policy>', 'the slots missed while no server ran (default skip)').choices(
        SCHEDULE_CATCH_UPS,
      ),
    )
    .addOption(new Option('--json', 'print the schedule as one JSON line on stdout'))
    .action((cron: string, input: string, f: Flags) => {
      const given = {
        cron,
        input,
        ...(f.timeZone !== undefined ? { time_zone: f.timeZone } : {}),
        ...(f.name !== undefined ? { name: f.name } : {}),
        ...(f.session !== undefined ? { session_id: f.session } : {}),
        ...(f.budget ? { budgets: budgets(f.budget) } : {}),
        ...(f.overlap !== undefined ? { overlap: f.overlap } : {}),
        ...(f.catchUp !== undefined ? { catch_up: f.catchUp } : {}),
      };
      const spec = ScheduleSpec.safeParse(given);
      if (!spec.success)
        throw new ValidationError(
          `schedules create: ${spec.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
        );
      done({ kind: 'schedules', action: 'create', spec: spec.data, json: Boolean(f.json) });
    });
  const scheduleAction = (action: 'get' | 'pause' | 'resume' | 'delete', description: string) =>
    schedules
      .command(action)
      .description(description)
      .argument('<schedule_id>')
      .addOption(new Option('--json', 'print the result as one JSON line on stdout'))
      .action((scheduleId: string, f: Flags) =>
        done({ kind: 'schedules', action, schedule_id: scheduleId, json: Boolean(f.json) }),
      );
  scheduleAction('get', 'show a schedule, its next slot and its latest firing');
  scheduleAction('pause', 'pause a schedule: no slot fires until it is resumed');
  scheduleAction('resume', 'resume a paused schedule (the slots it missed follow its catch-up policy)');
  scheduleAction('delete', 'delete a schedule (its tasks stay)');

  program
    .command('rebuild')
    .summary('recompute task states, checkpoints and memory from the log')
    .description(
      'Recompute task states, checkpoints and memory from the log and name what differed. Refused while another runledger process has the database open: it keeps the memory index open.',
    )
    .addOption(option.json())
    .addOption(option.force('rebuild even while another runledger process has the database open'))
    .action((f: Flags) => done({ kind: 'rebuild', json: Boolean(f.json), force: Boolean(f.force) }));

  program
    .command('backup')
    .summary('copy the SQLite database to a file while the server runs')
    .description(
      "Copy the SQLite database (RUNLEDGER_DB) to <file> with SQLite's online backup: a consistent copy taken while the server keeps writing. The file must not exist yet. On PostgreSQL use pg_dump (see docs/backup.md).",
    )
    .argument('<file>', 'where the copy goes (a new file)')
    .addOption(new Option('--json', 'print the result as one JSON line on stdout'))
    .action((file: string, f: Flags) => done({ kind: 'backup', file, json: Boolean(f.json) }));

  program
    .command('verify')
    .summary('check a backup (or any database): every task folds to its stored state')
    .description(
      'Open a SQLite file read-only (or a postgres:// URL), fold every task of its log and compare the fold with its row in the task projection; check that sequences have no gaps, positions rise and every payload parses. Exit 0 when all holds, 1 otherwise.',
    )
    .argument('<target>', 'a SQLite file, or a postgres:// URL (schema: RUNLEDGER_PG_SCHEMA)')
    .addOption(new Option('--json', 'print the report as one JSON line on stdout'))
    .action((target: string, f: Flags) => done({ kind: 'verify', target, json: Boolean(f.json) }));

  program
    .command('archive')
    .summary('move finished task trees out of the live log now (the retention policy, or --older-than)')
    .description(
      'Apply the retention policy (RUNLEDGER_RETENTION) now, or archive every finished task tree that ended longer than --older-than ago: their events move into checksummed archive segments and stay readable through every reader. Waiting and running tasks, and trees with one, never move. Works while the server runs. See docs/retention.md.',
    )
    .addOption(new Option('--older-than <duration>', 'an age instead of the policy: 30d, 12h, 90m'))
    .addOption(new Option('--dry-run', 'say what would move, move nothing'))
    .addOption(new Option('--json', 'print the result as one JSON line on stdout'))
    .action((f: Flags & { olderThan?: string; dryRun?: boolean }) =>
      done({
        kind: 'archive',
        older_than: f.olderThan ?? null,
        dry_run: Boolean(f.dryRun),
        json: Boolean(f.json),
      }),
    );

  program
    .command('restore')
    .summary('bring an archived task tree (or a whole segment) back into the live log')
    .argument('<id>', 'a task id (its whole tree returns) or an archive segment id (seg_...)')
    .addOption(new Option('--json', 'print the result as one JSON line on stdout'))
    .action((id: string, f: Flags) => done({ kind: 'restore', id, json: Boolean(f.json) }));

  program
    .command('erase')
    .summary("forget a session's content, or one task tree's: destroy their data keys (crypto-shredding)")
    .description(
      "Destroy the data keys of a session (every task tree of it), or with --task of the one task tree that task belongs to (its root, delegated children and their outbound deliveries; the session's other trees are kept): the personal fields of their events (sealed while RUNLEDGER_ERASURE=on) read as erased everywhere, in the database, its archives and its backups; task rows are refolded, checkpoints deleted, memory entries forgotten, SESSION_ERASED or TASK_TREE_ERASED recorded. Refused while a task concerned is not finished. Works while the server runs. See docs/retention.md#erasure.",
    )
    .argument('[session_id]', 'the session to forget')
    .addOption(new Option('--task <task_id>', 'forget the task tree this task belongs to, not a session'))
    .addOption(new Option('--json', 'print the result as one JSON line on stdout'))
    .action((sessionId: string | undefined, f: Flags) => {
      const task = f.task;
      if ((sessionId === undefined) === (task === undefined))
        throw new ValidationError(
          'erase takes a session_id or --task <task_id> (one of them); see runledger erase --help',
        );
      done(
        task !== undefined
          ? { kind: 'erase-tree', task_id: task, json: Boolean(f.json) }
          : { kind: 'erase', session_id: sessionId!, json: Boolean(f.json) },
      );
    });

  program
    .command('vacuum')
    .summary('give the space archived events used back (SQLite: the file shrinks)')
    .description(
      'SQLite: free pages are handed back to the file system (incremental vacuum; the first run on a database made before it rewrites the file once, holding writers meanwhile). PostgreSQL: VACUUM of the log tables (space is reused, not returned).',
    )
    .addOption(new Option('--json', 'print the result as one JSON line on stdout'))
    .action((f: Flags) => done({ kind: 'vacuum', json: Boolean(f.json) }));

  program
    .command('mcp')
    .description('the MCP servers of RUNLEDGER_MCP_SERVERS')
    .command('list')
    .description('start each configured MCP server and show its state and its tools')
    .addOption(new Option('--json', 'print the servers as one JSON line on stdout'))
    .action((f: Flags) => done({ kind: 'mcp_list', json: Boolean(f.json) }));

  program
    .command('serve')
    .description('run the HTTP server (configured through the environment)')
    .action(() => done({ kind: 'serve' }));

  return program;
}

/** The long flags each command takes, to say where a misplaced option belongs. */
function longFlags(command: Command): string[] {
  return command.options.map((o) => o.long).filter((l): l is string => Boolean(l) && l !== '--help');
}

/** Commander's "error: x\n(Did you mean y?)" as one line: "x (did you mean y?)". */
function oneLine(message: string): string {
  return message
    .replace(/^error: /, '')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join(' ')
    .replace('(Did you mean', '(did you mean')
    .replace(/\.$/, '');
}

/** A command's words after `runledger` (`schedules create`). */
const commandPath = (c: Command): string =>
  c.parent?.parent ? `${commandPath(c.parent)} ${c.name()}` : c.name();

function usageError(err: CommanderError, program: Command, command: Command | null): ValidationError {
  if (err.code === 'commander.unknownOption' && command) {
    const flag = /'([^']+)'/.exec(err.message)?.[1];
    if (flag && program.commands.some((c) => longFlags(c).includes(flag))) {
      const takes = longFlags(command);
      return new ValidationError(
        `${flag} does not apply to ${command.name()}${takes.length ? ` (it takes ${takes.join(', ')})` : ''}`,
      );
    }
  }
  const help = command ? `runledger ${commandPath(command)} --help` : 'runledger --help';
  return new ValidationError(`${oneLine(err.message)}; see ${help}`);
}

/** argv (after the node and script names) -> a command; ValidationError (one line) on misuse. */
export function parseArgs(argv: readonly string[]): CliCommand {
  let parsed: CliCommand | null = null;
  let help = '';
  let command: Command | null = null;
  const program = buildProgram((c) => (parsed = c));
  program
    .exitOverride()
    .configureOutput({
      writeOut: (s) => (help += s),
      writeErr: (s) => (help += s),
      // the message is rebuilt from the CommanderError below, as one line
      outputError: () => undefined,
    })
    .hook('preSubcommand', (_root, sub) => {
      command = sub;
    });
  for (const sub of program.commands) {
    // a command's own commands (schedules create): a usage error points at that one's help
    sub.hook('preSubcommand', (_parent, nested) => {
      command = nested;
    });
    for (const c of [sub, ...sub.commands]) c.exitOverride().configureOutput(program.configureOutput());
  }
  try {
    program.parse(argv.length ? [...argv] : ['--help'], { from: 'user' });
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    if (e.code === 'commander.helpDisplayed' || e.code === 'commander.help')
      return { kind: 'help', text: help };
    throw usageError(e, program, command);
  }
  if (!parsed) throw new ValidationError('no command given; see runledger --help');
  return parsed;
}
