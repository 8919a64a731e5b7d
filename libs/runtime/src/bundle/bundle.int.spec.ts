import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ValidationError } from '@runledger/contracts';
import { SqliteEventStore } from '@runledger/event-store';
import { SessionSecrets } from '../log/session-secrets';
import { ScriptedBackend } from '../model/scripted-backend';
import { AllowAllPolicy, RecordingRuntimeLogger, startTestRuntime, withSudoStdin } from '../testing';
import { SqliteWithMemory, openSqliteWithMemory } from '../testing/sqlite-memory';
import { BundleRuntime, parseBundle } from './bundle-format';
import { replayBundle } from './bundle-replay';
import { buildBundle, taskTreeLog } from './bundle-write';

const SECRET = 'Hunter-7f3kQ2zx';
const FORMS = [SECRET, Buffer.from(SECRET).toString('base64'), Buffer.from(`${SECRET}\n`).toString('base64')];
const leaks = (text: string) => FORMS.filter((f) => text.includes(f));

const tool = (name: string, command: string) =>
  JSON.stringify({ type: 'tool', tool: name, args: { command } });

describe('incident bundles of a real log (SQLite file, real runtime, real shell)', () => {
  let dir: string;
  let opened: SqliteWithMemory;
  let store: SqliteEventStore;
  const key = randomBytes(32);

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-bundle-int-'));
    opened = await openSqliteWithMemory(dir);
    store = opened.store;
  });
  afterEach(async () => {
    await opened.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const tools = () => withSudoStdin(dir);
  const runtimeOf = (): BundleRuntime => ({
    tools: tools().list(),
    agents: [],
    max_delegation_depth: 3,
    step_concurrency: 4,
    model_timeout_ms: null,
    coder_tool_turns: 8,
    max_rounds: 10,
  });

  /**
   * Task one is handed the password in its input and prints it (base64 too) before anyone calls it a
   * secret; task two, in the same session, is given it as a secret. The log keeps task one's copies:
   * they were written before the secret was provided.
   */
  async function record(): Promise<{ first: string; second: string }> {
    // one runtime per task: a scripted model answers each task from the start of its list
    const runtimeAnswering = (orchestrator: string[]) =>
      startTestRuntime({
        store,
        tools: tools(),
        permissions: new AllowAllPolicy(),
        model: new ScriptedBackend({ orchestrator }),
        secretKey: key,
      });
    const one = await runtimeAnswering([
      tool('shell_exec', `echo ${SECRET}; echo ${SECRET} | base64`),
      '{"type":"respond","content":"noted"}',
    ]);
    const submit = (rt: typeof one, input: string) =>
      rt.runtime.submit({ input, session_id: 'sess_pw' }, { source: 'cli' }).then((r) => r.task_id);
    const first = await submit(one, `my password is ${SECRET}`);
    expect((await one.runtime.settled(first)).final).toMatchObject({ stop_reason: 'completed' });
    await one.close();
    const two = await runtimeAnswering([
      tool('sudo_stdin', 'cat > pw.txt'),
      '{"type":"respond","content":"saved"}',
    ]);
    const second = await submit(two, 'save the password');
    const waiting = await two.runtime.settled(second);
    await two.runtime.provideSecret(second, waiting.pendingSecret!.request_id, SECRET);
    expect((await two.runtime.settled(second)).final).toMatchObject({ stop_reason: 'completed' });
    await two.close();
    return { first, second };
  }

  /** The session redaction as another process has it: the key, the log's fingerprints, no value held. */
  async function sessionSecrets(): Promise<SessionSecrets> {
    const secrets = new SessionSecrets(key);
    await secrets.load(() => store.readAll({ types: ['SECRET_PROVIDED'] }));
    return secrets;
  }

  it('what the session redaction recognises is masked, even printed before it was provided; the bundle replays', async () => {
    const { first } = await record();
    const recorded = await taskTreeLog(store, first);
    expect(leaks(JSON.stringify(recorded))).toEqual(FORMS);

    // without the key the value is not known: it stays (the bundle is only as good as what it is told)
    const blind = buildBundle(
      recorded,
      runtimeOf(),
      { secrets: [], patterns: [], sessionSecrets: null },
      new Date(),
    );
    expect(leaks(blind.text)).toEqual(FORMS);

    const { bundle, text } = buildBundle(
      recorded,
      runtimeOf(),
      { secrets: [], patterns: [], sessionSecrets: await sessionSecrets() },
      new Date(),
    );
    expect(leaks(text)).toEqual([]);
    expect(bundle.scrubbed).toMatchObject({ secrets: 1, fingerprints: 0 });
    expect(bundle.scrubbed.masked).toBeGreaterThanOrEqual(5);

    const { match, replay } = await replayBundle(parseBundle(text), new RecordingRuntimeLogger());
    expect(match).toMatchObject({ matches: true, detail: null });
    expect(replay.progress.final).toMatchObject({ stop_reason: 'completed', result: 'noted' });
  });

  it('SECRET_PROVIDED loses its fingerprint; the task that waited for the secret replays from its bundle', async () => {
    const { second } = await record();
    const recorded = await taskTreeLog(store, second);
    const digests = recorded[0].events.flatMap((e) =>
      e.type === 'SECRET_PROVIDED' ? e.payload.fingerprint!.forms.map((f) => f.digest) : [],
    );
    expect(digests).toHaveLength(4);
    const { bundle, text } = buildBundle(
      recorded,
      runtimeOf(),
      { secrets: [], patterns: [], sessionSecrets: await sessionSecrets() },
      new Date(),
    );
    for (const digest of digests) expect(text).not.toContain(digest);
    expect(bundle.scrubbed.fingerprints).toBe(1);
    expect(bundle.tasks[0].events.find((e) => e.type === 'SECRET_PROVIDED')!.payload).toEqual({
      request_id: expect.any(String),
      call_id: expect.any(String),
      secret_name: 'sudo_password',
    });
    const { match } = await replayBundle(bundle, new RecordingRuntimeLogger());
    expect(match).toMatchObject({ matches: true });
  });

  it('a pattern that breaks the log is refused when writing, and a damaged bundle when reading', async () => {
    const { first } = await record();
    const recorded = await taskTreeLog(store, first);
    const none = { secrets: [], sessionSecrets: null };
    // masking the event types' words breaks the payloads' enums
    expect(() =>
      buildBundle(recorded, runtimeOf(), { ...none, patterns: [/completed|cli/g] }, new Date()),
    ).toThrow(/the scrubbed log no longer reads .*a pattern matches more than secrets/);
    const { text } = buildBundle(recorded, runtimeOf(), { ...none, patterns: [] }, new Date());
    const json = JSON.parse(text);
    const refused = (value: unknown) => () =>
      parseBundle(typeof value === 'string' ? value : JSON.stringify(value));
    expect(refused('nope')).toThrow(/^bundle: not JSON/);
    expect(refused({ hello: 1 })).toThrow('not a Runledger incident bundle');
    expect(refused({ ...json, runledger_bundle: 2 })).toThrow(
      'format 2 is newer than this runledger reads (1)',
    );
    expect(refused({ ...json, task_id: 'task_other' })).toThrow('its first task is');
    const gap = structuredClone(json);
    gap.tasks[0].events.splice(1, 1);
    expect(refused(gap)).toThrow(/event 2 is task_\w+ sequence 3/);
    const bad = structuredClone(json);
    bad.tasks[0].events[0].payload.budgets = { max_rounds: -1 };
    expect(refused(bad)).toThrow(ValidationError);
    expect(refused(bad)).toThrow(/event 1: invalid TASK_RECEIVED payload: budgets\.max_rounds/);
    expect(refused({ ...json, tasks: [] })).toThrow(/tasks/);
  });
});
