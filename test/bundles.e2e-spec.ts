import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeOpenAiServer, FakeReply, readTaskLog, runCli, startFakeOpenAiServer } from '@runledger/testing';

/**
 * `runledger bundle` and `runledger replay --bundle` as child processes: a delegation tree recorded
 * against a local OpenAI-compatible server, bundled with its secrets scrubbed, then replayed in
 * another folder with no database, no model server and none of the recording's settings.
 */

jest.setTimeout(60_000);

/** the provider key; it does not look like a key (no built-in pattern knows it), so only the configuration can */
const KEY = 'rl-provider-Zq81xW2vT5kPm';
const TICKET = 'ACME-482913';
const HOST = 'db7.internal.example.com';
const PARENT = `look into ticket ${TICKET} with a helper`;
const CHILD = `print the connection string for ${HOST} using ${KEY}`;

type Body = Record<string, unknown>;
type Wire = { role: string; content?: string | null };
const messagesOf = (body: Body): Wire[] => (body.messages as Wire[]) ?? [];
const taskOf = (body: Body): string =>
  /## Task\n([\s\S]*)$/.exec(messagesOf(body).find((m) => m.role === 'user')?.content ?? '')?.[1].trim() ??
  '';
const toolResults = (body: Body): number => messagesOf(body).filter((m) => m.role === 'tool').length;

/** The parent delegates to the coder, which echoes what it was handed (key included), then both answer. */
function route(body: Body): FakeReply | undefined {
  const task = taskOf(body);
  if (task === PARENT)
    return toolResults(body) === 0
      ? {
          tool_calls: [
            {
              id: 'call_helper',
              name: 'runledger_delegate',
              arguments: JSON.stringify({ agent: 'coder', input: CHILD }),
            },
          ],
        }
      : { content: `ticket ${TICKET}: the helper printed the connection string` };
  if (task === CHILD)
    return toolResults(body) === 0
      ? {
          tool_calls: [
            {
              id: 'call_echo',
              name: 'shell_exec',
              arguments: JSON.stringify({ command: `echo postgres://app:${KEY}@${HOST}/app` }),
            },
          ],
        }
      : { content: `printed it: postgres://app:${KEY}@${HOST}/app` };
  return undefined;
}

interface BundleJson {
  task_id: string;
  tasks: Array<{
    task_id: string;
    parent_task_id: string | null;
    events: Array<{ type: string; payload: Body }>;
  }>;
  runtime: { tools: Array<{ name: string }> };
  outputs: Array<{ task_id: string; status: string; stop_reason: string; result: string | null }>;
  scrubbed: { secrets: number; patterns: string[]; masked: number; fingerprints: number };
}

describe('incident bundles (real CLI processes)', () => {
  let dir: string;
  let elsewhere: string;
  let rootId: string;
  let bundleFile: string;
  let recordedRoot: Awaited<ReturnType<typeof readTaskLog>>;
  const db = () => join(dir, 'data', 'runledger.db');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-bundle-'));
    elsewhere = mkdtempSync(join(tmpdir(), 'rl-bundle-elsewhere-'));
    const server: FakeOpenAiServer = await startFakeOpenAiServer({ apiKey: KEY });
    server.setRoute(route);
    try {
      const run = await runCli(['run', PARENT, '--yes'], {
        cwd: dir,
        env: {
          RUNLEDGER_DB: db(),
          RUNLEDGER_MODEL: 'openai',
          OPENAI_BASE_URL: server.baseURL,
          OPENAI_API_KEY: KEY,
          RUNLEDGER_MODEL_ORCHESTRATOR: 'tree-model',
          RUNLEDGER_CRITIC: 'off',
        },
      });
      expect(run.stderr).toContain('stop reason: completed');
      expect(run.code).toBe(0);
      rootId = /task (task_\w+) received/.exec(run.stderr)![1];
    } finally {
      await server.close();
    }
    recordedRoot = await readTaskLog(db(), rootId);
    bundleFile = join(dir, 'incident.json');
    const bundled = await runCli(
      ['bundle', rootId, bundleFile, '--redact', 'db[0-9]+\\.internal\\.example\\.com', '--json'],
      {
        cwd: dir,
        env: {
          RUNLEDGER_DB: db(),
          RUNLEDGER_MODEL: 'openai',
          OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
          OPENAI_API_KEY: KEY,
          RUNLEDGER_MODEL_ORCHESTRATOR: 'tree-model',
          RUNLEDGER_BUNDLE_REDACT: JSON.stringify(['ACME-[0-9]{6}']),
        },
      },
    );
    expect(bundled.stderr).toBe('');
    expect(bundled.code).toBe(0);
    expect(JSON.parse(bundled.stdout).bundle).toMatchObject({ file: bundleFile, tasks: 2 });
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(elsewhere, { recursive: true, force: true });
  });

  it('the log holds the key, the ticket and the host; the bundle holds none of them, in any encoding', async () => {
    const [child] = (await readTaskLog(db(), rootId)).flatMap((e) =>
      e.type === 'CHILD_TASK_STARTED' ? [e.payload.child_task_id] : [],
    );
    const childLog = JSON.stringify(await readTaskLog(db(), child));
    expect(childLog).toContain(KEY);
    expect(childLog).toContain(HOST);
    expect(JSON.stringify(recordedRoot)).toContain(TICKET);

    const text = readFileSync(bundleFile, 'utf8');
    for (const secret of [KEY, TICKET, HOST, Buffer.from(KEY).toString('base64').slice(0, 20)])
      expect(text).not.toContain(secret);
    const bundle = JSON.parse(text) as BundleJson;
    expect(bundle.task_id).toBe(rootId);
    expect(bundle.tasks.map((t) => [t.task_id, t.parent_task_id])).toEqual([
      [rootId, null],
      [child, rootId],
    ]);
    expect(bundle.scrubbed).toMatchObject({ secrets: 1, fingerprints: 0 });
    expect(bundle.scrubbed.patterns).toEqual(
      expect.arrayContaining(['ACME-[0-9]{6}', 'db[0-9]+\\.internal\\.example\\.com']),
    );
    expect(bundle.scrubbed.masked).toBeGreaterThanOrEqual(6);
    // masks keep the length of what they hide
    const echoed = bundle.tasks[1].events.find((e) => e.type === 'TOOL_CALLED')!.payload.args as {
      command: string;
    };
    expect(echoed.command).toHaveLength(`echo postgres://app:${KEY}@${HOST}/app`.length);
    expect(echoed.command).toMatch(/^echo postgres:\/\/app:\[REDACTED\**\]@\[REDACTED\**\]\/app$/);
    // the runtime it ran under, and how each task ended
    expect(bundle.runtime.tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['shell_exec', 'file_read']),
    );
    expect(bundle.outputs).toEqual([
      expect.objectContaining({ task_id: rootId, status: 'completed', stop_reason: 'completed' }),
      expect.objectContaining({ task_id: child, status: 'completed', stop_reason: 'completed' }),
    ]);
  });

  it('replays offline in another folder: no database, no model server, no settings; nothing written there', async () => {
    const copy = join(elsewhere, 'incident.json');
    writeFileSync(copy, readFileSync(bundleFile));
    const missingDb = join(elsewhere, 'data', 'runledger.db');
    const res = await runCli(['replay', '--bundle', 'incident.json'], {
      cwd: elsewhere,
      env: { RUNLEDGER_DB: missingDb, RUNLEDGER_MODEL: 'sys_util' },
    });
    expect(res.stderr).toContain('stop reason: completed');
    expect(res.stdout).toContain(`replay matches the recording of ${rootId} (bundle incident.json)`);
    expect(res.code).toBe(0);
    expect(readdirSync(elsewhere)).toEqual(['incident.json']);
    expect(existsSync(missingDb)).toBe(false);
  });

  it('a bundle whose recording the replay does not reproduce is reported like any replay divergence, exit 1', async () => {
    const bundle = JSON.parse(readFileSync(bundleFile, 'utf8')) as BundleJson;
    const root = bundle.tasks[0].events;
    root[root.length - 1].payload.result = 'an answer the model never gave';
    const tampered = join(elsewhere, 'tampered.json');
    writeFileSync(tampered, JSON.stringify(bundle));
    const res = await runCli(['replay', '--bundle', tampered, '--json'], { cwd: elsewhere });
    expect(res.code).toBe(1);
    const verdict = JSON.parse(res.stdout.trim().split('\n').pop()!).replay;
    expect(verdict).toMatchObject({ matches: false, source_task_id: rootId, bundle: tampered });
    expect(verdict.detail).toMatch(
      /^event \d+ \(TASK_COMPLETED\) payload\.result: recorded 'an answer the model never gave', replayed 'ticket \[REDACTED\*\]: the helper printed/,
    );
  });

  it('refuses what it cannot do, writing nothing: a missing file, an unknown task, no database', async () => {
    const absent = await runCli(['replay', '--bundle', 'absent.json'], { cwd: elsewhere });
    expect(absent.stderr).toMatch(/^runledger: replay --bundle: no file at .*absent\.json$/m);
    expect(absent.code).toBe(2);

    const unknown = await runCli(['bundle', 'task_nosuch', join(elsewhere, 'none.json')], {
      cwd: elsewhere,
      env: { RUNLEDGER_DB: db() },
    });
    expect(unknown.stderr).toContain('task task_nosuch not found');
    expect(unknown.code).toBe(1);
    expect(existsSync(join(elsewhere, 'none.json'))).toBe(false);

    const nowhere = join(elsewhere, 'nowhere', 'runledger.db');
    const noDb = await runCli(['bundle', rootId, join(elsewhere, 'nodb.json')], {
      cwd: elsewhere,
      env: { RUNLEDGER_DB: nowhere },
    });
    expect(noDb.stderr).toContain(`no database at ${nowhere}`);
    expect(noDb.code).toBe(2);
    expect(existsSync(join(elsewhere, 'nowhere'))).toBe(false);
    expect(existsSync(join(elsewhere, 'nodb.json'))).toBe(false);
  });
});
