import { ConfigError } from '@runledger/contracts';
import { OpenAiBackend } from '@runledger/runtime';
import { fallbackModelsFromConfig } from './model-options';
import { loadConfig } from './config';

const base = {
  RUNLEDGER_DB: '/tmp/x.db',
  RUNLEDGER_MODEL: 'openai',
  OPENAI_BASE_URL: 'http://primary.local:8000/v1',
  RUNLEDGER_MODEL_ORCHESTRATOR: 'big-model',
};
const config = (chain: unknown, env: Record<string, string> = {}) =>
  loadConfig({
    ...base,
    RUNLEDGER_FALLBACK_MODELS: typeof chain === 'string' ? chain : JSON.stringify(chain),
    ...env,
  });
/** The boot error's message and details (which a log may print). */
const bootError = (chain: unknown, env: Record<string, string> = {}): string => {
  try {
    config(chain, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return `${(e as Error).message}\n${JSON.stringify((e as ConfigError).details)}`;
  }
  throw new Error('the config was accepted');
};

describe('RUNLEDGER_FALLBACK_MODELS', () => {
  it('absent: no fallback providers', () => {
    const c = loadConfig(base);
    expect(c.RUNLEDGER_FALLBACK_MODELS).toBeUndefined();
    expect(fallbackModelsFromConfig(c, {})).toEqual([]);
  });

  it('parses the chain in order and builds one OpenAI provider per entry, labelled by name or model@host', () => {
    const c = config(
      [
        { base_url: 'http://backup.local:9000/v1', model: 'small-model', api_key_env: 'BACKUP_KEY' },
        { name: 'local', base_url: 'http://127.0.0.1:11434/v1', model: 'llama' },
      ],
      { BACKUP_KEY: 'sk-backup' },
    );
    expect(c.RUNLEDGER_FALLBACK_MODELS).toEqual([
      { base_url: 'http://backup.local:9000/v1', model: 'small-model', api_key_env: 'BACKUP_KEY' },
      { name: 'local', base_url: 'http://127.0.0.1:11434/v1', model: 'llama' },
    ]);
    const chain = fallbackModelsFromConfig(c, { BACKUP_KEY: 'sk-backup' });
    expect(chain.every((b) => b instanceof OpenAiBackend)).toBe(true);
    expect(chain.map((b) => [b.label, b.modelFor('orchestrator')])).toEqual([
      ['small-model@backup.local:9000', 'small-model'],
      ['local', 'llama'],
    ]);
    // The config keeps the variable's name, never its value.
    expect(JSON.stringify(c)).not.toContain('sk-backup');
  });

  it.each([
    ['not JSON', '[{oops', /RUNLEDGER_FALLBACK_MODELS/],
    ['not a list', { base_url: 'http://x/v1', model: 'm' }, /RUNLEDGER_FALLBACK_MODELS/],
    ['no model', [{ base_url: 'http://x/v1' }], /RUNLEDGER_FALLBACK_MODELS\.0\.model/],
    ['a bad URL', [{ base_url: 'not a url', model: 'm' }], /RUNLEDGER_FALLBACK_MODELS\.0\.base_url/],
    [
      'an unknown field',
      [{ base_url: 'http://x/v1', model: 'm', modle: 'n' }],
      /RUNLEDGER_FALLBACK_MODELS\.0/,
    ],
    [
      'a key written into the config',
      [{ base_url: 'http://x/v1', model: 'm', api_key: 'sk-live' }],
      /RUNLEDGER_FALLBACK_MODELS\.0\.api_key: keys are not accepted here/,
    ],
    [
      'a key variable name that is not one',
      [{ base_url: 'http://x/v1', model: 'm', api_key_env: 'sk-live-123' }],
      /RUNLEDGER_FALLBACK_MODELS\.0\.api_key_env: must be the name of an environment variable/,
    ],
    [
      'a key variable that is not set',
      [{ base_url: 'http://x/v1', model: 'm', api_key_env: 'NOT_SET_ANYWHERE' }],
      /RUNLEDGER_FALLBACK_MODELS\.0\.api_key_env: environment variable NOT_SET_ANYWHERE is not set/,
    ],
    [
      'the primary again',
      [{ base_url: 'http://primary.local:8000/v1', model: 'big-model' }],
      /RUNLEDGER_FALLBACK_MODELS\.0: provider big-model@primary\.local:8000 is already in the chain/,
    ],
    [
      'two entries under one name',
      [
        { name: 'b', base_url: 'http://x/v1', model: 'm' },
        { name: 'b', base_url: 'http://y/v1', model: 'n' },
      ],
      /RUNLEDGER_FALLBACK_MODELS\.1: provider b is already in the chain/,
    ],
  ])('%s stops the boot naming the variable', (_name, chain, message) => {
    expect(bootError(chain)).toMatch(message);
  });

  it('a key value never appears in the boot error', () => {
    expect(bootError([{ base_url: 'http://x/v1', model: 'm', api_key: 'sk-live-secret' }])).not.toContain(
      'sk-live-secret',
    );
  });

  it('with RUNLEDGER_MODEL=sys_util there is nothing to fall back from', () => {
    expect(() =>
      loadConfig({
        RUNLEDGER_DB: '/tmp/x.db',
        RUNLEDGER_FALLBACK_MODELS: JSON.stringify([{ base_url: 'http://x/v1', model: 'm' }]),
      }),
    ).toThrow(/RUNLEDGER_FALLBACK_MODELS: RUNLEDGER_MODEL is sys_util/);
  });
});
