/**
 * The controller in a child process, as `npm start` runs it, for benchmarks
 * that load it from this process over loopback.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

export const BENCH_TOKEN = 'bench-admin-token-0123456789abcdef';
export const benchAuth = { authorization: `Bearer ${BENCH_TOKEN}` };

export interface ControllerProcess {
  child: ChildProcess;
  url: string;
  /** SIGTERM, then wait for it to exit */
  stop(): Promise<void>;
}

/** Boots the controller on a free port over the SQLite file `db`; extra `env` wins over the defaults. */
export async function startController(
  db: string,
  workspace: string,
  env: Record<string, string> = {},
): Promise<ControllerProcess> {
  const root = resolve(__dirname, '..');
  const child = spawn(
    process.execPath,
    ['-r', '@swc-node/register', join(root, 'apps/controller/src/main.ts')],
    {
      cwd: root,
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        RUNLEDGER_DB: db,
        RUNLEDGER_ALLOWED_ROOT: workspace,
        RUNLEDGER_ADMIN_TOKEN: BENCH_TOKEN,
        RUNLEDGER_RATE_LIMIT: '0',
        LOG_LEVEL: 'warn',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  // the address is in the banner on stderr
  const url = await new Promise<string>((resolveUrl, reject) => {
    let out = '';
    const read = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolveUrl(m[1]);
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
  const exited = new Promise((r) => child.once('exit', r));
  return {
    child,
    url,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
