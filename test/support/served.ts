import { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { CliResult, servedUrl, spawnCli } from './cli';

export const SERVED_TOKEN = 'tok-served-e2e-0123456789abcdef';
export const servedAuth = { authorization: `Bearer ${SERVED_TOKEN}`, 'content-type': 'application/json' };

export interface Served {
  url: string;
  child: ChildProcess;
  stop(): Promise<CliResult>;
}

/** `runledger serve` on `db` as a child process (sys_util, process sandbox), once it answers. */
export async function serveChild(dir: string, db: string, env: Record<string, string> = {}): Promise<Served> {
  const { child, done } = spawnCli(['serve'], {
    cwd: dir,
    env: {
      PORT: '0',
      HOST: '127.0.0.1',
      RUNLEDGER_DB: db,
      RUNLEDGER_ALLOWED_ROOT: join(dir, 'workspace'),
      RUNLEDGER_ADMIN_TOKEN: SERVED_TOKEN,
      RUNLEDGER_SANDBOX: 'process',
      RUNLEDGER_RATE_LIMIT: '0',
      // the machine running the tests is busy: never shed a submission here
      RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: '0',
      RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '1',
      RUNLEDGER_TASK_START_LOOP_UTILIZATION: '1',
      LOG_LEVEL: 'info',
      ...env,
    },
  });
  return {
    url: await servedUrl(child),
    child,
    stop: async () => {
      child.kill('SIGTERM');
      return done;
    },
  };
}

export async function submitTask(url: string, input: string): Promise<string> {
  const res = await fetch(`${url}/tasks`, {
    method: 'POST',
    headers: servedAuth,
    body: JSON.stringify({ input }),
  });
  if (res.status !== 202) throw new Error(`POST /tasks answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { task_id: string }).task_id;
}

export async function getJson(
  url: string,
  path: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, { headers: servedAuth });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export async function taskOf(url: string, id: string): Promise<Record<string, unknown>> {
  const { status, body } = await getJson(url, `/tasks/${id}`);
  if (status !== 200) throw new Error(`GET /tasks/${id} answered ${status}`);
  return body;
}

/** The task once it ended (completed, failed or cancelled), polled for up to 20 s. */
export async function settledTask(url: string, id: string): Promise<Record<string, unknown>> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    const task = await taskOf(url, id);
    if (['completed', 'failed', 'cancelled'].includes(task.status as string)) return task;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`task ${id} did not end`);
}
