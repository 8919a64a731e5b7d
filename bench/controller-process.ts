/**
 * The controller (or another server entry) in a child process, as `npm start`
 * runs it, for benchmarks that load it from this process over loopback.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

export const BENCH_TOKEN = 'bench-admin-token-0123456789abcdef';
export const benchAuth = { authorization: `Bearer ${BENCH_TOKEN}` };

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  /** SIGTERM, then wait for it to exit */
  stop(): Promise<void>;
}

/** The controller's entry in its TypeScript sources (run through swc-node, compiled as it loads). */
export const CONTROLLER_SOURCES = 'apps/controller/src/main.ts';
/** The controller as `npm start` runs it: the build of `npm run build`. */
export const CONTROLLER_BUILD = 'dist/apps/controller/src/main.js';

export interface SpawnOptions {
  /** node flags before the entry (e.g. --cpu-prof) */
  nodeArgs?: string[];
  /** the controller's entry (startController): CONTROLLER_SOURCES unless said */
  controllerEntry?: string;
  /** copy the child's stderr (its warnings, the banner) to ours */
  echoStderr?: boolean;
}

/**
 * Runs an entry of this repository in a child process (a TypeScript one through
 * the swc require hook, a built .js one as it is) and resolves with the URL it prints (the controller prints it on stderr, its stdout
 * carries only JSON log lines); `env` is laid over ours.
 */
export async function spawnServer(
  entry: string,
  env: Record<string, string>,
  options: SpawnOptions = {},
): Promise<ServerProcess> {
  const root = resolve(__dirname, '..');
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      ...(entry.endsWith('.ts') ? ['-r', '@swc-node/register'] : []),
      join(root, entry),
    ],
    { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  if (options.echoStderr) child.stderr!.pipe(process.stderr);
  const exited = new Promise((r) => child.once('exit', r));
  const url = await new Promise<string>((resolveUrl, reject) => {
    let out = '';
    let listening = false;
    // once the URL is known, the output is still drained (a full pipe would block the server's logging) but no longer kept
    const read = (d: Buffer) => {
      if (listening) return;
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        listening = true;
        resolveUrl(m[1]);
      }
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
  return {
    child,
    url,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Boots the controller on a free port over the SQLite file `db`; extra `env` wins over the defaults. */
export function startController(
  db: string,
  workspace: string,
  env: Record<string, string> = {},
  options: SpawnOptions = {},
): Promise<ServerProcess> {
  return spawnServer(
    options.controllerEntry ?? CONTROLLER_SOURCES,
    {
      PORT: '0',
      HOST: '127.0.0.1',
      RUNLEDGER_DB: db,
      RUNLEDGER_ALLOWED_ROOT: workspace,
      RUNLEDGER_ADMIN_TOKEN: BENCH_TOKEN,
      RUNLEDGER_RATE_LIMIT: '0',
      LOG_LEVEL: 'warn',
      ...env,
    },
    options,
  );
}
