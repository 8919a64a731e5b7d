import 'reflect-metadata';
import { dirname, join, resolve, sep } from 'node:path';
import {
  IllegalStateError,
  MCP_ELICITATION_RULE,
  PermissionDecision,
  PermissionRulesConfig,
  RuntimeEvent,
  ValidationError,
} from '@runledger/contracts';
import { INestApplicationContext, Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventStore, isPostgresUrl } from '@runledger/event-store';
import { MemoryService } from '@runledger/memory';
import {
  RuntimeController,
  TaskProgress,
  TaskTree,
  ReplayMatch,
  ReplayResult,
  StderrRuntimeLogger,
  compareReplay,
  pendingSignalWait,
  pendingTimer,
  progressContextFold,
  replayBundle,
  todoList,
} from '@runledger/runtime';
import { CheckpointStore, ProcessRegistry, Erasure, TaskStateStore } from '@runledger/state-store';
import { McpClientManager, ToolSandbox } from '@runledger/tools';
import { needsOsSandbox } from '@runledger/permissions';
import { AppConfig, dataDirOf, loadConfig } from '../config';
import { CliModule } from './cli.module';
import { backupDatabase, verifyDatabase } from './backup';
import {
  bundlePatterns,
  checkBundleTarget,
  installationSecrets,
  readBundleFile,
  writeBundle,
} from './bundle';
import { archiveNow, restoreArchived, vacuumDatabase } from './archive';
import { mcpListing, mcpListingText } from './mcp-list';
import { listTasks, printEvents, sessionBudgetText } from './listings';
import { runSchedules } from './schedules';
import { eraseSession, eraseTaskTree, erasureText, treeErasureText } from '../sessions/erase-session';
import { CliOutput } from './output';
import { CliCommand } from './program';
import { EXIT } from './exit-codes';
import {
  UnknownOutcome,
  eventLine,
  eventTone,
  unknownOutcomeLine,
  unknownOutcomes,
  usageLine,
  todoLine,
} from './render';

/** What --yes cannot answer where no OS sandbox stands behind the permission parser (see OS_SANDBOX_RULES). */
export const YES_WITHOUT_SANDBOX =
  "with --yes, reads and writes outside the allowed root, other processes' data and the network stay refused unless the permission rules name them";

interface FollowOptions {
  io: CliOutput;
  json: boolean;
  yes: boolean;
  interactive: boolean;
}

/**
 * "always" lets more through than this one call, so the person is told what first: the event line
 * printed just above says it, or with --json (events as JSON lines) the question does.
 */
async function askPermission(io: CliOutput, p: TaskProgress, json: boolean): Promise<PermissionDecision> {
  const req = p.pendingPermission!;
  const covers = req.covers ? (json ? `${req.covers}\n` : '') : null;
  const answer = (
    await io.ask(
      `${covers ?? ''}Allow ${req.tool} ${JSON.stringify(req.args)}? [y]es once / [a]lways${covers === null ? ' this session' : ' (as said above)'} / [n]o: `,
    )
  )
    .trim()
    .toLowerCase();
  return answer === 'a' || answer === 'always'
    ? 'allow_always'
    : answer === 'y' || answer === 'yes'
      ? 'allow_once'
      : 'deny';
}

/**
 * The CLI's tools work in the current folder, and by default the database is
 * ./data/runledger.db inside it: without this a tool call (or `--yes`) could
 * overwrite or delete the event log the task is being written to. The
 * storage folder (when it lies inside the allowed root) or else each storage
 * file becomes a protected path: writing or deleting it is a hard stop.
 */
export function protectStorage(config: AppConfig, cwd: string): AppConfig {
  const root = resolve(cwd, config.RUNLEDGER_ALLOWED_ROOT ?? cwd);
  const folder = dataDirOf(config, cwd);
  const inside = (p: string, parent: string) => p.startsWith(parent + sep);
  // on PostgreSQL the log is out of the tools' reach; the files beside it are not
  const db = isPostgresUrl(config.RUNLEDGER_DB) ? null : resolve(cwd, config.RUNLEDGER_DB);
  const files = [
    ...(db
      ? ['', '-wal', '-shm', '-journal', '.memory.hnsw', '.memory.hnsw.meta.json'].map((s) => db + s)
      : []),
    join(folder, 'admin.token'),
    join(folder, 'secrets.key'),
  ];
  const paths = inside(folder, root) && (!db || dirname(db) === folder) ? [folder] : files;
  const rules = PermissionRulesConfig.parse(config.RUNLEDGER_PERMISSION_RULES ?? {});
  return {
    ...config,
    RUNLEDGER_PERMISSION_RULES: { ...rules, protected_paths: [...rules.protected_paths, ...paths] },
  };
}

/** One event: a JSON line on stdout with --json, else a progress line on stderr. */
function showEvent(e: RuntimeEvent, o: Pick<FollowOptions, 'io' | 'json'>): void {
  if (o.json) return o.io.answer(JSON.stringify(e));
  const line = eventLine(e);
  if (line) o.io.progress(line, eventTone(line));
}

/** Prints the task's events as they are written and answers what it can until the task ends or must wait. */
async function follow(app: INestApplicationContext, taskId: string, o: FollowOptions): Promise<number> {
  const runtime = app.get(RuntimeController);
  // without bubblewrap nothing but the parser stands between a command and the machine
  const confined = app.get(ToolSandbox).sandboxStatus().effective === 'bwrap';
  let lastSeq = 0;
  let printing: Promise<void> = Promise.resolve();
  const seen: RuntimeEvent[] = [];
  const show = (e: RuntimeEvent) => {
    seen.push(e);
    showEvent(e, o);
  };
  const print = () =>
    (printing = printing.then(async () => {
      for (const e of await app.get(EventStore).readStream(taskId, { after_seq: lastSeq })) {
        show(e);
        lastSeq = e.sequence;
      }
    }));
  const timer = setInterval(() => void print(), 100);
  const onSigint = () => void runtime.cancel(taskId).catch(() => undefined);
  process.once('SIGINT', onSigint);
  const tree = app.get(TaskTree);
  /** answers what `p` waits for (this task, or a task it delegated to); an exit code when a person must do it elsewhere */
  const answer = async (p: TaskProgress): Promise<number | null> => {
    if (p.status === 'awaiting_permission') {
      const req = p.pendingPermission!;
      // an MCP server's form needs its fields filled in: neither --yes nor a y/n question can answer it
      if (req.rule === MCP_ELICITATION_RULE)
        return waiting(
          p,
          o,
          `POST /tasks/${p.task_id}/permissions/${req.request_id} {"decision": "allow_once", "content": {...}} on a running server (the form is in the task's pending request), or runledger resolve ${p.task_id} ${req.request_id} deny`,
        );
      if (!o.yes && !o.interactive)
        return waiting(p, o, `runledger resolve ${p.task_id} ${req.request_id} allow_once|allow_always|deny`);
      if (o.yes && !confined && needsOsSandbox(req.rule)) {
        o.io.progress(
          `--yes refused ${req.tool} (${req.reason}): without the OS sandbox only the permission rules, or you when asked, may allow it`,
          'yellow',
        );
        await runtime.resolvePermission(p.task_id, req.request_id, 'deny');
        return null;
      }
      const decision: PermissionDecision = o.yes ? 'allow_once' : await askPermission(o.io, p, o.json);
      await runtime.resolvePermission(p.task_id, req.request_id, decision);
      return null;
    }
    const req = p.pendingSecret!;
    if (!o.interactive)
      return waiting(
        p,
        o,
        `POST /tasks/${p.task_id}/secrets/${req.request_id} {"secret": "..."} on a running server (a secret is never read from the command line)`,
      );
    await runtime.provideSecret(
      p.task_id,
      req.request_id,
      await o.io.ask(`${req.secret_name} for ${req.tool}: `, true),
    );
    return null;
  };
  try {
    for (;;) {
      // the task settles, or a task it delegated to waits for a person while it waits for that task
      let settled = false;
      const settling = runtime.settled(taskId).finally(() => (settled = true));
      const below = await Promise.race([
        settling.then(() => null),
        childWaiting(tree, taskId, () => settled),
      ]);
      await print();
      if (below) {
        const code = await answer(await runtime.progress(below));
        if (code !== null) return code;
        continue;
      }
      const p = await settling;
      if (p.final) return summary(p, o, unknownOutcomes(seen));
      if (p.status === 'awaiting_permission' || p.status === 'awaiting_secret') {
        const code = await answer(p);
        if (code !== null) return code;
        continue;
      }
      // a timer is waited out here (this process fires it when due); a signal must come from elsewhere
      const signalWait = pendingSignalWait(p);
      if (signalWait && !pendingTimer(p))
        return waiting(
          p,
          o,
          `runledger signal ${p.task_id} ${signalWait.name} '<payload JSON>' (or POST /tasks/${p.task_id}/signals/${signalWait.name} on a running server)`,
        );
      if (p.status === 'waiting') {
        await runtime.untilMovedOn(taskId, p.last_seq);
        continue;
      }
      // queued behind an unfinished task of its session: its turn comes when that one ends
      if (p.queuedBehind !== null) {
        o.io.progress(
          `task ${taskId} waits for its turn: task ${p.queuedBehind} of its session has not ended`,
        );
        await runtime.untilMovedOn(taskId, p.last_seq);
        continue;
      }
      o.io.progress(
        `task ${taskId} stopped before its end; continue it with: runledger resume ${taskId}`,
        'yellow',
      );
      return EXIT.ended;
    }
  } finally {
    clearInterval(timer);
    process.removeListener('SIGINT', onSigint);
    await printing;
  }
}

/** The first task below `taskId` that waits for a person, polled until there is one or `over` says to stop. */
async function childWaiting(tree: TaskTree, taskId: string, over: () => boolean): Promise<string | null> {
  while (!over()) {
    const [request] = await tree.descendantsPending(taskId);
    if (request) return request.task_id;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return null;
}

async function refuseBesideOthers(app: INestApplicationContext, what: string, how: string): Promise<void> {
  const others = await app.get(ProcessRegistry).others();
  if (others.length === 0) return;
  const who = others
    .map((p) => `pid ${p.pid} on ${p.hostname} since ${p.started_at}: ${p.command}`)
    .join('; ');
  throw new IllegalStateError(`${what} (${who}). ${how}`);
}

/**
 * Every projection recomputed from the log; what differed is named (the log is the truth, a
 * difference is drift) and makes the exit code 1. A checkpoint is checked whole: its task state
 * and the runtime progress it resumes from, each against a full fold up to it.
 */
async function rebuild(app: INestApplicationContext, io: CliOutput, json: boolean): Promise<number> {
  const tasks = await app.get(TaskStateStore).rebuildReport();
  const checkpoints = await app.get(CheckpointStore).rebuild(progressContextFold);
  const memoryService = app.get<MemoryService | null>(MemoryService);
  const memory = memoryService ? await memoryService.rebuildFromLog() : null;
  if (json) io.answer(JSON.stringify({ rebuild: { tasks, checkpoints, memory_events_applied: memory } }));
  else {
    const named = (ids: string[]) => (ids.length ? `: ${ids.join(', ')}` : '');
    io.answer(
      `tasks: ${tasks.tasks} rebuilt from ${tasks.events} events; ${tasks.changed.length} differed from the log${named(tasks.changed)}`,
    );
    io.answer(
      `checkpoints: ${checkpoints.checkpoints} checked against a full fold; ${checkpoints.changed.length} differed and were rewritten${named(checkpoints.changed)}`,
    );
    io.answer(memory === null ? 'memory: off' : `memory: rebuilt from ${memory} MEMORY_WRITTEN events`);
  }
  return tasks.changed.length + checkpoints.changed.length === 0 ? EXIT.completed : EXIT.ended;
}

function summary(p: TaskProgress, o: FollowOptions, unknown: UnknownOutcome[]): number {
  const f = p.final!;
  const todos = todoList(p.todos);
  if (o.json)
    o.io.answer(
      JSON.stringify({
        summary: {
          task_id: p.task_id,
          status: p.status,
          stop_reason: f.stop_reason,
          detail: f.detail,
          result: f.result,
          usage: p.usage,
          outcome_unknown: unknown,
          ...(todos.length ? { todos } : {}),
        },
      }),
    );
  else {
    // the answer alone on stdout; how the task ended is progress, on stderr (the exit code says it too)
    if (f.result) o.io.answer(f.result);
    o.io.progress(
      `stop reason: ${f.stop_reason} (${f.detail})`,
      f.stop_reason === 'completed' ? 'green' : 'red',
    );
    o.io.progress(usageLine(p.usage), 'dim');
    for (const t of todos)
      o.io.progress(
        todoLine(t),
        t.status === 'done' ? 'green' : t.active && t.required && t.status !== 'cancelled' ? 'yellow' : 'dim',
      );
    for (const u of unknown) o.io.progress(unknownOutcomeLine(u), 'yellow');
  }
  return f.stop_reason === 'completed' ? EXIT.completed : EXIT.ended;
}

function waiting(p: TaskProgress, o: FollowOptions, how: string): number {
  const signal = pendingSignalWait(p);
  if (o.json)
    o.io.answer(
      JSON.stringify({
        waiting: {
          task_id: p.task_id,
          status: p.status,
          request: p.pendingPermission ?? p.pendingSecret ?? signal,
          resolve: how,
        },
      }),
    );
  else {
    o.io.progress(
      signal
        ? `task ${p.task_id} is waiting for signal ${signal.name}. Send it with:`
        : `task ${p.task_id} is ${p.status}; no terminal to ask. Resolve it with:`,
      'cyan',
    );
    o.io.progress(`  ${how}`);
  }
  return EXIT.waiting;
}

/** The runtime over the configured database, as the CLI runs it: one person at a terminal, no load to shed. */
function bootCli(config: AppConfig, yes = false): Promise<INestApplicationContext> {
  return NestFactory.createApplicationContext(
    CliModule.forRoot({
      config: protectStorage(
        {
          ...config,
          RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: 0,
          RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: 1,
          RUNLEDGER_TASK_START_LOOP_UTILIZATION: 1,
        },
        process.cwd(),
      ),
      defaultAllowedRoot: process.cwd(),
      ...(yes ? { sandboxNotice: YES_WITHOUT_SANDBOX } : {}),
    }),
    { logger: false, abortOnError: false },
  );
}

async function execute(
  cmd: Exclude<CliCommand, { kind: 'help' | 'serve' | MaintenanceKind | 'bundle' | 'replay_bundle' }>,
  io: CliOutput,
): Promise<number> {
  const env = { ...process.env };
  if ('model' in cmd && cmd.model) env.RUNLEDGER_MODEL = cmd.model;
  const app = await bootCli(loadConfig(env), 'yes' in cmd && cmd.yes);
  const runtime = app.get(RuntimeController);
  const store = app.get(EventStore);
  const interactive = io.interactive;
  try {
    switch (cmd.kind) {
      case 'run': {
        const { task_id } = await runtime.submit(
          {
            input: cmd.input,
            budgets: cmd.budgets,
            accept_checks: cmd.accept,
            ...(cmd.session ? { session_id: cmd.session } : {}),
            ...(cmd.on_busy ? { on_busy: cmd.on_busy } : {}),
            ...(cmd.write ? { allow_mutation: true } : {}),
          },
          { source: 'cli' },
        );
        return await follow(app, task_id, { io, json: cmd.json, yes: cmd.yes, interactive });
      }
      case 'resume': {
        if (cmd.task_id) await runtime.progress(cmd.task_id); // an unknown task is refused before anything runs
        // A task another process runs right now (its lease is live) is left to it: resuming it here would run
        // its tool calls a second time. --force takes it over anyway, fencing the other process off.
        const owner = cmd.task_id && !cmd.force ? await runtime.ownedElsewhere(cmd.task_id) : null;
        if (owner)
          throw new IllegalStateError(
            `not resuming ${cmd.task_id}: runledger process ${owner} is running it (its lease is live). ` +
              'Wait for it, or pass --force to take the task over.',
          );
        // Every unfinished task nobody runs is taken; each is followed to its end (or until it waits for a
        // person) before this process exits, so none is cut off in the middle of a tool call.
        const resumed = await runtime.resumeUnfinished({ force: cmd.force });
        const ids = cmd.task_id ? [cmd.task_id, ...resumed.filter((id) => id !== cmd.task_id)] : resumed;
        if (!cmd.json)
          io.progress(
            `resuming ${resumed.length} unfinished task(s)${resumed.length ? `: ${resumed.join(', ')}` : ''}`,
          );
        let code: number = EXIT.completed;
        for (const id of ids)
          code = Math.max(code, await follow(app, id, { io, json: cmd.json, yes: cmd.yes, interactive }));
        return code;
      }
      case 'resolve':
        await runtime.resolvePermission(cmd.task_id, cmd.request_id, cmd.decision);
        return await follow(app, cmd.task_id, { io, json: cmd.json, yes: false, interactive });
      case 'fork': {
        const { task_id } = await runtime.fork(cmd.task_id, cmd.sequence);
        return await follow(app, task_id, { io, json: cmd.json, yes: cmd.yes, interactive });
      }
      case 'mcp_list': {
        const servers = mcpListing(app.get(McpClientManager));
        io.answer(cmd.json ? JSON.stringify({ mcp: servers }) : mcpListingText(servers));
        return servers.every((s) => s.state === 'ready') ? EXIT.completed : EXIT.ended;
      }
      case 'tasks':
        return await listTasks(app, io, cmd);
      case 'schedules':
        return await runSchedules(app, io, cmd);
      case 'events':
        return await printEvents(app, io, cmd);
      case 'signal': {
        const sent = await runtime.sendSignal(cmd.task_id, {
          name: cmd.name,
          payload: cmd.payload,
          ...(cmd.signal_id ? { signal_id: cmd.signal_id } : {}),
        });
        if (cmd.json) io.answer(JSON.stringify({ signal: sent }));
        else
          io.progress(
            `signal ${sent.name} ${sent.created ? 'recorded' : 'was already recorded'} as ${sent.signal_id}; ${sent.taken_by ? `taken by wait ${sent.taken_by}` : 'kept until a wait for it takes it'}`,
          );
        // a task the signal woke runs here: followed to its end, or until it waits again
        if (!sent.created || sent.taken_by === null) return EXIT.completed;
        return await follow(app, cmd.task_id, { io, json: cmd.json, yes: cmd.yes, interactive });
      }
      case 'session_budget': {
        const budget = cmd.set
          ? await runtime.setSessionBudget(cmd.session_id, cmd.set)
          : await runtime.sessionBudget(cmd.session_id);
        io.answer(
          cmd.json
            ? JSON.stringify({ session_id: cmd.session_id, budget })
            : sessionBudgetText(cmd.session_id, budget),
        );
        return EXIT.completed;
      }
      case 'erase': {
        const erased = await eraseSession(
          app.get(Erasure),
          app.get<MemoryService | null>(MemoryService),
          cmd.session_id,
        );
        io.answer(cmd.json ? JSON.stringify({ erase: erased }) : erasureText(erased));
        return EXIT.completed;
      }
      case 'erase-tree': {
        const erased = await eraseTaskTree(
          app.get(Erasure),
          app.get<MemoryService | null>(MemoryService),
          cmd.task_id,
        );
        io.answer(cmd.json ? JSON.stringify({ erase: erased }) : treeErasureText(erased));
        return EXIT.completed;
      }
      case 'cancel':
        await runtime.cancel(cmd.task_id);
        return await follow(app, cmd.task_id, { io, json: cmd.json, yes: false, interactive: false });
      case 'rebuild':
        // the memory index file is replaced: a running server would keep (and later save) its old one
        if (!cmd.force)
          await refuseBesideOthers(
            app,
            'not rebuilding: another runledger process has this database open',
            'Stop it first, or pass --force.',
          );
        return await rebuild(app, io, cmd.json);
      case 'replay': {
        // the replay ran on a log of its own, settled before it returns: its events are printed from there
        const replay = await runtime.replay(cmd.task_id, { save: cmd.save });
        const match = compareReplay(await store.readWholeStream(cmd.task_id), replay.events);
        return reportReplay(replay, match, { task_id: cmd.task_id }, io, cmd.json);
      }
    }
  } finally {
    await app.close();
  }
}

/** Commands that work on the database alone, without the runtime (see maintain). */
type MaintenanceKind = 'backup' | 'verify' | 'archive' | 'restore' | 'vacuum';
const MAINTENANCE: readonly string[] = ['backup', 'verify', 'archive', 'restore', 'vacuum'];
const isMaintenance = (cmd: CliCommand): cmd is Extract<CliCommand, { kind: MaintenanceKind }> =>
  MAINTENANCE.includes(cmd.kind);

/** archive, restore, vacuum: the archiver on the configured database, what it did on stdout. */
async function archiveCommand(
  cmd: Extract<CliCommand, { kind: 'archive' | 'restore' | 'vacuum' }>,
  config: AppConfig,
  io: CliOutput,
): Promise<number> {
  const cwd = process.cwd();
  if (cmd.kind === 'archive') {
    const run = await archiveNow(config, cwd, { older_than: cmd.older_than, dry_run: cmd.dry_run });
    if (cmd.json) io.answer(JSON.stringify({ archive: run }));
    else {
      for (const s of run.skipped) io.progress(`kept ${s.task_id}: ${s.reason}`, 'dim');
      const receipts = run.receipts > 0 ? `, ${run.receipts} hook receipt(s)` : '';
      io.answer(
        run.busy
          ? 'another instance is archiving now; nothing done'
          : run.dry_run
            ? `would archive ${run.tasks.length} task(s)${receipts}, ${run.events} events; would catalogue ${run.catalogued.tasks} archived task(s)`
            : `archived ${run.tasks.length} task(s)${receipts}, ${run.events} events, into ${run.segments.length} segment(s) (${run.bytes} bytes); catalogued ${run.catalogued.tasks} archived task(s)`,
      );
    }
    return EXIT.completed;
  }
  if (cmd.kind === 'restore') {
    const restored = await restoreArchived(config, cwd, cmd.id);
    io.answer(
      cmd.json
        ? JSON.stringify({ restore: restored })
        : `restored ${restored.task_ids.length} task(s), ${restored.events} events, from ${restored.segment_id}`,
    );
    return EXIT.completed;
  }
  const vacuumed = await vacuumDatabase(config, cwd);
  io.answer(
    cmd.json
      ? JSON.stringify({ vacuum: vacuumed })
      : `vacuum (${vacuumed.mode}): ${vacuumed.bytes_before} -> ${vacuumed.bytes_after} bytes`,
  );
  return EXIT.completed;
}

/**
 * Backup and verify work on the database alone, without booting the runtime: a server may be running
 * on it (backup), or it is a copy nothing runs on (verify).
 */
async function maintain(cmd: Extract<CliCommand, { kind: MaintenanceKind }>, io: CliOutput): Promise<number> {
  const config = loadConfig(process.env);
  if (cmd.kind === 'archive' || cmd.kind === 'restore' || cmd.kind === 'vacuum')
    return archiveCommand(cmd, config, io);
  if (cmd.kind === 'backup') {
    const result = await backupDatabase(config, cmd.file, process.cwd());
    io.answer(
      cmd.json
        ? JSON.stringify({ backup: result })
        : `backed up ${result.events} events to ${result.file} (${result.bytes} bytes)`,
    );
    return EXIT.completed;
  }
  const report = await verifyDatabase(config, cmd.target, process.cwd());
  if (cmd.json) io.answer(JSON.stringify({ verify: report }));
  else if (report.ok)
    io.answer(
      `verified ${cmd.target}: ${report.tasks} tasks in ${report.streams} streams, ${report.events} events; every task folds to its stored state`,
    );
  else {
    for (const p of report.problems) io.progress(p.problem, 'red');
    io.answer(`${cmd.target} failed verification: ${report.problems.length} problem(s)`);
  }
  return report.ok ? EXIT.completed : EXIT.ended;
}

/** `runledger bundle`: the task tree's bundle, scrubbed, written to a new file. */
async function bundle(cmd: Extract<CliCommand, { kind: 'bundle' }>, io: CliOutput): Promise<number> {
  const config = loadConfig(process.env);
  const target = checkBundleTarget(config, cmd.file, process.cwd());
  const patterns = bundlePatterns(config, cmd.redact);
  // read before the runtime boots: the model clients take the provider keys out of the environment
  const secrets = installationSecrets(config, process.env);
  const app = await bootCli(config);
  try {
    const written = await writeBundle(app, config, { taskId: cmd.task_id, target, secrets, patterns });
    io.answer(
      cmd.json
        ? JSON.stringify({ bundle: written })
        : `bundled ${written.tasks} task(s), ${written.events} events, to ${written.file} (${written.bytes} bytes); ` +
            `masked ${written.scrubbed.masked} match(es) of ${written.scrubbed.secrets} secret(s) and ${written.scrubbed.patterns.length} pattern(s)`,
    );
    return EXIT.completed;
  } finally {
    await app.close();
  }
}

/** The replay's events, its summary and its verdict, as `runledger replay` prints them. */
function reportReplay(
  replay: ReplayResult,
  match: ReplayMatch,
  source: { task_id: string; bundle?: string },
  io: CliOutput,
  json: boolean,
): number {
  const o = { io, json, yes: false, interactive: false };
  for (const e of replay.events) showEvent(e, o);
  let code: number = EXIT.ended;
  if (replay.progress.final) code = summary(replay.progress, o, unknownOutcomes(replay.events));
  else io.progress(`the replay stopped before its end (${replay.progress.status})`, 'yellow');
  const of = source.bundle ? `${source.task_id} (bundle ${source.bundle})` : source.task_id;
  if (json)
    io.answer(
      JSON.stringify({
        replay: {
          source_task_id: source.task_id,
          ...(source.bundle ? { bundle: source.bundle } : {}),
          task_id: replay.task_id,
          saved: replay.saved,
          ...match,
        },
      }),
    );
  else
    io.answer(
      match.matches
        ? `replay matches the recording of ${of} (${match.compared} events compared)`
        : `replay diverged from the recording of ${of}: ${match.detail}`,
    );
  return match.matches ? code : Math.max(code, EXIT.ended);
}

/** `runledger replay --bundle`: from the file alone; no configuration, database or model of this machine is used. */
async function replayBundled(
  cmd: Extract<CliCommand, { kind: 'replay_bundle' }>,
  io: CliOutput,
): Promise<number> {
  const bundled = readBundleFile(cmd.file, process.cwd());
  // the replay's runtime is a Nest context of its own: its boot lines are not the CLI's output
  Logger.overrideLogger(false);
  const { replay, match } = await replayBundle(bundled, new StderrRuntimeLogger());
  return reportReplay(replay, match, { task_id: bundled.task_id, bundle: cmd.file }, io, cmd.json);
}

/** Runs a parsed command (not help or serve: main.ts starts those) to its exit code. */
export async function runCommand(
  cmd: Exclude<CliCommand, { kind: 'help' | 'serve' }>,
  io: CliOutput,
): Promise<number> {
  try {
    if (isMaintenance(cmd)) return await maintain(cmd, io);
    if (cmd.kind === 'bundle') return await bundle(cmd, io);
    if (cmd.kind === 'replay_bundle') return await replayBundled(cmd, io);
    return await execute(cmd, io);
  } catch (e) {
    io.error(e instanceof Error ? e.message : String(e));
    return e instanceof ValidationError ? EXIT.usage : EXIT.ended;
  }
}
