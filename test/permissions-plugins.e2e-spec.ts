import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiHarness, TOKENS, bootApi, waitForTask } from './api-harness';

jest.setTimeout(60_000);

const TOKEN = 'api-token-Zq81xLm0';

/**
 * A plugin folder from RUNLEDGER_PLUGINS, with a manifest that asks for permission and names a
 * secret; a broken plugin beside it is reported and skipped. A scripted orchestrator calls it.
 */
describe('plugins from RUNLEDGER_PLUGINS, with a manifest secret, through HTTP', () => {
  let dir: string;
  let sut: ApiHarness;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-plugins-e2e-'));
    const plugin = (name: string, files: Record<string, string>) => {
      mkdirSync(join(dir, 'plugins', name), { recursive: true });
      for (const [f, c] of Object.entries(files)) writeFileSync(join(dir, 'plugins', name, f), c);
    };
    plugin('api_echo', {
      'manifest.json': JSON.stringify({
        name: 'api_echo',
        description: 'calls an API with a token (echoes what it would send)',
        args_schema: {
          type: 'object',
          properties: { path: { type: 'string' } },
          required: ['path'],
          additionalProperties: false,
        },
        requires_permission: true,
        secrets: ['API_TOKEN'],
      }),
      // prints the token the way a careless client would: in a header, basic auth, a URL
      'index.js': `exports.createTool = () => ({ run: async (args, ctx) => {
        const t = ctx.secrets.get('API_TOKEN');
        return { ok: true, output: {
          request: 'GET ' + args.path + '?token=' + encodeURIComponent(t),
          authorization: 'Basic ' + Buffer.from('bot:' + t).toString('base64'),
          json: JSON.stringify({ token: t }),
        } };
      } });`,
    });
    plugin('broken', { 'manifest.json': '{ "name": "broken", ', 'index.js': '' });
    writeFileSync(
      join(dir, 'script.json'),
      JSON.stringify({
        orchestrator: [
          JSON.stringify({ type: 'tool', tool: 'api_echo', args: { path: '/v1/items' } }),
          JSON.stringify({ type: 'respond', content: 'called the API' }),
        ],
      }),
    );
    sut = await bootApi(
      {
        RUNLEDGER_PLUGINS: join(dir, 'plugins'),
        RUNLEDGER_MODEL: `scripted:${join(dir, 'script.json')}`,
        RUNLEDGER_MEMORY: 'off',
      },
      { checkResponses: true },
    );
  });
  afterAll(async () => {
    await sut.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('boots despite the broken plugin and reports it', () => {
    const logs = sut.logs.join('');
    expect(logs).toContain('tool plugin skipped');
    expect(logs).toContain('broken');
  });

  it('asks permission (manifest), then the secret (manifest), runs the plugin, and redacts the token everywhere', async () => {
    const taskId = (
      await sut.request('POST', '/tasks', { token: TOKENS.writer, body: { input: 'list the items' } })
    ).body.task_id;
    const perm = await waitForTask(sut, taskId, (s) => s === 'awaiting_permission');
    expect(perm.pending[0]).toMatchObject({ tool: 'api_echo', kind: 'permission' });
    await sut.request('POST', `/tasks/${taskId}/permissions/${perm.pending[0].request_id}`, {
      token: TOKENS.approver,
      body: { decision: 'allow_once' },
    });
    const sec = await waitForTask(sut, taskId, (s) => s === 'awaiting_secret');
    expect(sec.pending[0]).toMatchObject({ tool: 'api_echo', kind: 'secret', secret_name: 'API_TOKEN' });
    const provided = await sut.request('POST', `/tasks/${taskId}/secrets/${sec.pending[0].request_id}`, {
      token: TOKENS.approver,
      body: { secret: TOKEN },
    });
    expect(provided.status).toBe(202);
    expect(await waitForTask(sut, taskId)).toMatchObject({ status: 'completed', result: 'called the API' });

    const events = await sut.request('GET', `/tasks/${taskId}/events?limit=1000`);
    const outcome = events.body.events.find((e: { type: string }) => e.type === 'TOOL_COMPLETED');
    expect(outcome.payload.result.output).toEqual({
      request: 'GET /v1/items?token=[REDACTED]',
      // 'Ym90O' is "bot:" alone: the characters carrying bits of the token are gone
      authorization: 'Basic Ym90O[REDACTED]',
      json: '{"token":"[REDACTED]"}',
    });
    const everything = [
      events.text,
      (await sut.request('GET', '/admin/events?limit=1000')).text,
      (await sut.request('GET', `/tasks/${taskId}`)).text,
      provided.text,
      sut.logs.join(''),
    ].join('\n');
    for (const form of [
      TOKEN,
      Buffer.from(`bot:${TOKEN}`).toString('base64'),
      Buffer.from(TOKEN).toString('base64').slice(0, 10),
    ]) {
      expect(everything).not.toContain(form);
    }
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});
