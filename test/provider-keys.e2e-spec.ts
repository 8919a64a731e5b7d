import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NestFactory } from '@nestjs/core';
// the test boots the app's own composition (the rule keeps libs from importing apps/)
// eslint-disable-next-line no-restricted-imports
import { CliModule } from '../apps/controller/src/cli/cli.module';
// eslint-disable-next-line no-restricted-imports
import { loadConfig } from '../apps/controller/src/config';
import { ServerProcess } from './permissions-server';

jest.setTimeout(60_000);

const PRIMARY_KEY = 'sk-test-primary-5f1c';
const BACKUP_KEY = 'sk-test-backup-9a2e';

/**
 * Plugin tools run inside the server process: once the model clients are built, the provider keys
 * (OPENAI_API_KEY and each fallback's api_key_env) are gone from the server's process.env.
 */
describe('runledger serve drops provider keys from its own environment', () => {
  let server: ServerProcess;

  beforeAll(async () => {
    server = ServerProcess.create();
    const dir = server.dir;
    mkdirSync(join(dir, 'plugins', 'env_probe'), { recursive: true });
    writeFileSync(
      join(dir, 'plugins', 'env_probe', 'manifest.json'),
      JSON.stringify({
        name: 'env_probe',
        description: 'reports which provider key variables the server process can see',
        args_schema: { type: 'object', properties: {}, additionalProperties: false },
        requires_permission: false,
        secrets: [],
      }),
    );
    writeFileSync(
      join(dir, 'plugins', 'env_probe', 'index.js'),
      `exports.createTool = () => ({ run: async () => ({ ok: true, output: {
        OPENAI_API_KEY: 'OPENAI_API_KEY' in process.env,
        BACKUP_KEY: 'BACKUP_KEY' in process.env,
        PATH: 'PATH' in process.env,
      } }) });`,
    );
    writeFileSync(
      join(dir, 'script.json'),
      JSON.stringify({
        orchestrator: [
          JSON.stringify({ type: 'tool', tool: 'env_probe', args: {} }),
          JSON.stringify({ type: 'respond', content: 'probed' }),
        ],
      }),
    );
    Object.assign(server.env, {
      RUNLEDGER_PLUGINS: join(dir, 'plugins'),
      RUNLEDGER_MODEL: `scripted:${join(dir, 'script.json')}`,
      RUNLEDGER_MEMORY: 'off',
      RUNLEDGER_FALLBACK_MODELS: JSON.stringify([
        { base_url: 'http://127.0.0.1:9/v1', model: 'backup-model', api_key_env: 'BACKUP_KEY' },
      ]),
      OPENAI_API_KEY: PRIMARY_KEY,
      BACKUP_KEY,
    });
    await server.start();
  });
  afterAll(async () => {
    await server.dispose();
  });

  it('a plugin sees neither OPENAI_API_KEY nor a fallback api_key_env variable', async () => {
    const submitted = await server.request('POST', '/tasks', { input: 'probe the environment' });
    expect(submitted.status).toBe(202);
    const taskId = submitted.body.task_id;
    expect(await server.waitFor(taskId)).toMatchObject({ status: 'completed', result: 'probed' });
    const outcome = (await server.events(taskId)).find((e) => e.type === 'TOOL_COMPLETED');
    expect(outcome?.payload.result).toMatchObject({
      ok: true,
      output: { OPENAI_API_KEY: false, BACKUP_KEY: false, PATH: true },
    });
  });
});

describe('the CLI composition drops provider keys from the environment it read them from', () => {
  it('before any task runs: a booted application context has no key left in that environment', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-keys-'));
    const env: Record<string, string | undefined> = {
      RUNLEDGER_DB: join(dir, 'runledger.db'),
      RUNLEDGER_MODEL: 'openai',
      RUNLEDGER_MODEL_ORCHESTRATOR: 'model-a',
      OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
      OPENAI_API_KEY: PRIMARY_KEY,
      BACKUP_KEY,
      RUNLEDGER_FALLBACK_MODELS: JSON.stringify([
        { base_url: 'http://127.0.0.1:9/v1', model: 'model-b', api_key_env: 'BACKUP_KEY' },
      ]),
      PATH: process.env.PATH,
    };
    const app = await NestFactory.createApplicationContext(
      CliModule.forRoot({ config: loadConfig(env), defaultAllowedRoot: dir, env }),
      { logger: false, abortOnError: false },
    );
    try {
      expect(Object.keys(env).filter((k) => k === 'OPENAI_API_KEY' || k === 'BACKUP_KEY')).toEqual([]);
      expect(env.PATH).toBe(process.env.PATH);
    } finally {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
