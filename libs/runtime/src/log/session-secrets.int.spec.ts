import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { Critic, CriticVerdict } from '@runledger/critic';
import { SqliteEventStore } from '@runledger/event-store';
import { MemoryService, createCriticMemoryHook } from '@runledger/memory';
import { ScriptedBackend } from '../model/scripted-backend';
import { AllowAllPolicy, startTestRuntime, withSudoStdin } from '../testing';
import { SqliteWithMemory, openSqliteWithMemory } from '../testing/sqlite-memory';

const SECRET = 'Pw-int-4e1b!q9';
/** The secret as a later command may print it: plain, base64 (also with echo's newline), hex. */
const FORMS = [
  SECRET,
  Buffer.from(SECRET).toString('base64'),
  Buffer.from(`${SECRET}\n`).toString('base64'),
  Buffer.from(SECRET).toString('hex'),
];
const leaks = (text: string) => FORMS.filter((f) => text.includes(f));

/** A critic that finds every outcome worth remembering, so the memory write policy writes what it saw. */
class KeepEverythingCritic extends Critic {
  readonly kind = 'heuristic';
  async evaluate(): Promise<CriticVerdict> {
    return {
      critic: 'heuristic',
      score: { correctness: 1, usefulness: 1, safety: 1, memory_store: true, weight: 0.9, notes: 'keep' },
      error: null,
      exchange: null,
    };
  }
}

const tool = (name: string, command: string) =>
  JSON.stringify({ type: 'tool', tool: name, args: { command } });

describe('a provided secret is redacted from the later output of its session', () => {
  let dir: string;
  let opened: SqliteWithMemory;
  let store: SqliteEventStore;
  let memory: MemoryService;
  const key = randomBytes(32);

  const open = async () => {
    opened = await openSqliteWithMemory(dir);
    ({ store, memory } = opened);
  };
  const shut = () => opened.close();

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-session-secrets-'));
    await open();
  });
  afterEach(async () => {
    await shut();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A runtime as the controller builds one: the critic + memory write policy hook, the fingerprint key beside the db. */
  function runtime(orchestrator: string[]) {
    const tools = withSudoStdin(dir);
    return startTestRuntime({
      store,
      tools,
      permissions: new AllowAllPolicy(),
      model: new ScriptedBackend({ orchestrator }),
      hooks: [createCriticMemoryHook({ critic: new KeepEverythingCritic(), memory })],
      secretKey: key,
    });
  }

  /** Runs a task to its end, answering its secret request with SECRET. */
  async function run(rt: Awaited<ReturnType<typeof runtime>>, input: string, session_id: string) {
    const { task_id } = await rt.runtime.submit({ input, session_id }, { source: 'cli' });
    let progress = await rt.runtime.settled(task_id);
    if (progress.pendingSecret) {
      await rt.runtime.provideSecret(task_id, progress.pendingSecret.request_id, SECRET);
      progress = await rt.runtime.settled(task_id);
    }
    return { task_id, progress };
  }

  /** Everything stored: every event, every memory entry, the database files themselves. */
  async function everythingStored(): Promise<string> {
    await memory.sync();
    const events: RuntimeEvent[] = await store.readAll({});
    const entries = await memory.list({}, 1000);
    memory.flush();
    const files = readdirSync(dir)
      .filter((f) => f.startsWith('runledger.db'))
      .map((f) => readFileSync(join(dir, f), 'latin1'));
    return [JSON.stringify(events), JSON.stringify(entries), ...files].join('\n');
  }

  it('a step saves the secret from stdin to a file, a later step prints it: no event, no memory entry holds it', async () => {
    const rt = await runtime([
      tool('sudo_stdin', 'cat > pw.txt'),
      tool('shell_exec', 'cat pw.txt; base64 pw.txt; od -An -tx1 pw.txt | tr -d " \\n"; echo'),
      '{"type":"respond","content":"done"}',
    ]);
    const { task_id, progress } = await run(rt, 'save the password, then show it', 'sess_a');
    await rt.close();
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    expect(readFileSync(join(dir, 'pw.txt'), 'utf8')).toBe(`${SECRET}\n`);

    const events = await store.readWholeStream(task_id);
    const printed = events.filter((e) => e.type === 'TOOL_COMPLETED')[1];
    expect(JSON.stringify(printed.payload)).toContain('[REDACTED]');
    // the memory write policy saw the printed output (its critic scored it)
    expect(events.filter((e) => e.type === 'CRITIC_RESULT').map((e) => e.payload.call_id)).toContain(
      printed.type === 'TOOL_COMPLETED' ? printed.payload.call_id : null,
    );
    expect(leaks(await everythingStored())).toEqual([]);
  });

  it('twenty answers posted at once: the command gets the one the log accepted, no refused one', async () => {
    const rt = await runtime([tool('sudo_stdin', 'cat > pw.txt'), '{"type":"respond","content":"saved"}']);
    const { task_id } = await rt.runtime.submit(
      { input: 'save the password', session_id: 'sess_race' },
      { source: 'cli' },
    );
    const pending = (await rt.runtime.settled(task_id)).pendingSecret!;
    const answers = Array.from({ length: 20 }, (_, i) => `answer-${i}-${randomBytes(4).toString('hex')}`);
    const outcomes = await Promise.allSettled(
      answers.map((a) => rt.runtime.provideSecret(task_id, pending.request_id, a)),
    );
    const accepted = answers.filter((_, i) => outcomes[i].status === 'fulfilled');
    expect(accepted).toHaveLength(1);
    const progress = await rt.runtime.settled(task_id);
    await rt.close();
    expect(progress.final).toMatchObject({ stop_reason: 'completed' });
    expect(readFileSync(join(dir, 'pw.txt'), 'utf8')).toBe(`${accepted[0]}\n`);
  });

  it('another task of the session prints it after a restart (new runtime over the same database): still redacted', async () => {
    const first = await runtime([tool('sudo_stdin', 'cat > pw.txt'), '{"type":"respond","content":"saved"}']);
    await run(first, 'save the password', 'sess_b');
    await first.close();
    await shut();

    await open();
    const second = await runtime([
      tool('shell_exec', 'cat pw.txt'),
      tool('shell_exec', 'base64 pw.txt; echo "pass=$(cat pw.txt)"'),
      '{"type":"respond","content":"shown"}',
    ]);
    const other = await run(second, 'show the saved password', 'sess_b');
    // a task of another session is none of its business
    const elsewhere = await run(
      await runtime([tool('shell_exec', 'echo Pw-int-4e1b'), '{"type":"respond","content":"ok"}']),
      'echo',
      'sess_c',
    );
    await second.close();
    expect(other.progress.final).toMatchObject({ stop_reason: 'completed' });
    const outputs = (await store.readWholeStream(other.task_id))
      .filter((e) => e.type === 'TOOL_COMPLETED')
      .map((e) => JSON.stringify(e.payload));
    expect(outputs).toEqual([expect.stringContaining('[REDACTED]'), expect.stringContaining('[REDACTED]')]);
    expect(leaks(await everythingStored())).toEqual([]);
    expect(JSON.stringify(await store.readWholeStream(elsewhere.task_id))).toContain('Pw-int-4e1b');
  });
});
