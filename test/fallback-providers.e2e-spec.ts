import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RuntimeEvent } from '@runledger/contracts';
import { NestFactory } from '@nestjs/core';
import { RuntimeController, replayView } from '@runledger/runtime';
import {
  FakeOpenAiServer,
  readTaskLog,
  runCli,
  startFakeOpenAiServer,
  stderrProblems,
} from '@runledger/testing';
// the test boots the app's own composition (the rule keeps libs from importing apps/)
// eslint-disable-next-line no-restricted-imports
import { CliModule } from '../apps/controller/src/cli/cli.module';
// eslint-disable-next-line no-restricted-imports
import { loadConfig } from '../apps/controller/src/config';

/**
 * RUNLEDGER_FALLBACK_MODELS end to end: config -> composition -> a run that
 * the secondary serves (its key read from the variable the config names), and
 * the replay of that run with both servers gone.
 */

const SECONDARY_KEY = 'sk-secondary-e2e-7f3a';

describe('RUNLEDGER_FALLBACK_MODELS through the composition and the CLI', () => {
  let primary: FakeOpenAiServer;
  let secondary: FakeOpenAiServer;
  let dir: string;
  let env: Record<string, string>;

  beforeEach(async () => {
    primary = await startFakeOpenAiServer({ apiKey: 'key-primary' });
    secondary = await startFakeOpenAiServer({ apiKey: SECONDARY_KEY });
    dir = mkdtempSync(join(tmpdir(), 'rl-fallback-e2e-'));
    env = {
      RUNLEDGER_DB: join(dir, 'runledger.db'),
      RUNLEDGER_ALLOWED_ROOT: dir,
      RUNLEDGER_SANDBOX: 'process',
      RUNLEDGER_MEMORY: 'off',
      // A model critic's calls are not replayed (hooks do not run in a replay); keep it out of the comparison.
      RUNLEDGER_CRITIC: 'heuristic',
      RUNLEDGER_MODEL: 'openai',
      RUNLEDGER_MODEL_PROTOCOL: 'json',
      OPENAI_BASE_URL: primary.baseURL,
      OPENAI_API_KEY: 'key-primary',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'model-a',
      RUNLEDGER_FALLBACK_MODELS: JSON.stringify([
        { name: 'secondary', base_url: secondary.baseURL, model: 'model-b', api_key_env: 'RL_SECONDARY_KEY' },
      ]),
      RL_SECONDARY_KEY: SECONDARY_KEY,
      RUNLEDGER_MODEL_RETRIES: '1',
      RUNLEDGER_RETRY_BASE_MS: '5',
      RUNLEDGER_RETRY_MAX_MS: '20',
    };
  });
  afterEach(async () => {
    await primary.close();
    await secondary.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const streamOf = (taskId: string): Promise<RuntimeEvent[]> => readTaskLog(env.RUNLEDGER_DB, taskId);
  const script = () => {
    primary.setDefault({ status: 500 });
    secondary.enqueue(
      { content: '{"type":"tool","tool":"shell_exec","args":{"command":"echo served-by-b"}}' },
      { content: '{"type":"respond","content":"the secondary did it"}' },
    );
  };

  /**
   * the CLI's composition in-process, with a copy of this test's environment for the key variables
   * (a booted composition drops the keys from the environment it read them from)
   */
  const boot = () => {
    const own = { ...env };
    return NestFactory.createApplicationContext(
      CliModule.forRoot({ config: loadConfig(own), defaultAllowedRoot: dir, env: own }),
      { logger: false, abortOnError: false },
    );
  };

  it('the composition: the secondary serves with the key from its variable; replayed offline event for event', async () => {
    script();
    const built = await boot();
    const runtime = built.get(RuntimeController);
    let taskId: string;
    try {
      taskId = (await runtime.submit({ input: 'echo through the fallback' }, { source: 'cli' })).task_id;
      const progress = await runtime.settled(taskId);
      expect(progress.final).toMatchObject({ stop_reason: 'completed', result: 'the secondary did it' });
    } finally {
      await built.close();
    }
    const events = await streamOf(taskId);
    expect(secondary.requests.map((r) => r.headers.authorization)).toEqual([
      `Bearer ${SECONDARY_KEY}`,
      `Bearer ${SECONDARY_KEY}`,
    ]);
    expect(primary.requests).toHaveLength(2);
    expect(JSON.stringify(events)).not.toContain(SECONDARY_KEY);
    const served = events.flatMap((e) =>
      e.type === 'MODEL_RESPONDED' && !e.payload.error ? [e.payload.model] : [],
    );
    expect(served).toEqual(['model-b', 'model-b']);

    // Offline: both servers gone; nothing may be asked.
    await primary.close();
    await secondary.close();
    const again = await boot();
    try {
      const replay = await again.get(RuntimeController).replay(taskId);
      expect(replay.progress.final).toMatchObject({
        stop_reason: 'completed',
        result: 'the secondary did it',
      });
      expect(replayView(replay.events)).toEqual(replayView(events));
    } finally {
      await again.close();
    }
  });

  it('runledger run shows the switch and the model that served; runledger replay reproduces it offline', async () => {
    script();
    const run = await runCli(['run', 'echo through the fallback', '--yes'], { cwd: dir, env });
    expect(stderrProblems(run.stderr)).toEqual([]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('asking orchestrator (openai:model-a)');
    expect(run.stderr).toMatch(/! fallback: provider_error after 2 attempts; falling back to secondary/);
    expect(run.stderr).toContain('asking orchestrator (openai:model-b)');
    expect(run.stdout).toContain('the secondary did it');
    expect(run.stdout + run.stderr).not.toContain(SECONDARY_KEY);
    const taskId = /task (task_\w+) received/.exec(run.stderr)![1];

    await primary.close();
    await secondary.close();
    const replay = await runCli(['replay', taskId, '--save'], { cwd: dir, env });
    expect(replay.code).toBe(0);
    expect(replay.stdout).toContain('the secondary did it');
    const replayedId = /task (task_\w+) received/.exec(replay.stderr)![1];
    expect(replayView(await streamOf(replayedId))).toEqual(replayView(await streamOf(taskId)));
  });

  it('a key variable that is not set stops the CLI at boot, naming the variable', async () => {
    const res = await runCli(['run', 'anything'], { cwd: dir, env: { ...env, RL_SECONDARY_KEY: '' } });
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain(
      'RUNLEDGER_FALLBACK_MODELS.0.api_key_env: environment variable RL_SECONDARY_KEY is not set',
    );
    expect(primary.requests).toHaveLength(0);
  });
});
