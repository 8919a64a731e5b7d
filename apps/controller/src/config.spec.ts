import { resolve } from 'node:path';
import { dataDirOf, loadConfig, providerKeyNames, storageOptionsFrom } from './config';

describe('RUNLEDGER_DB', () => {
  it('a file path selects SQLite, a postgres:// URL PostgreSQL; another URL is refused naming the variable', () => {
    expect(storageOptionsFrom(loadConfig({ RUNLEDGER_DB: './data/x.db' }))).toEqual({
      driver: 'sqlite',
      path: resolve('./data/x.db'),
      synchronous: 'FULL',
      // auto: the writer thread runs under the build, not under the TypeScript sources jest runs
      writerThread: false,
      // RUNLEDGER_ERASURE is off unless asked for
      sealPayloads: false,
    });
    expect(
      storageOptionsFrom(loadConfig({ RUNLEDGER_DB: './data/x.db', RUNLEDGER_SQLITE_WRITER_THREAD: 'on' })),
    ).toMatchObject({ driver: 'sqlite', writerThread: true });
    expect(
      storageOptionsFrom(loadConfig({ RUNLEDGER_DB: './data/x.db', RUNLEDGER_ERASURE: 'on' })),
    ).toMatchObject({ driver: 'sqlite', sealPayloads: true });
    expect(
      storageOptionsFrom(
        loadConfig({ RUNLEDGER_DB: 'postgresql://u:p@db:5432/runledger', RUNLEDGER_PG_SCHEMA: 'rl' }),
      ),
    ).toEqual({
      driver: 'postgres',
      url: 'postgresql://u:p@db:5432/runledger',
      schema: 'rl',
      maxConnections: 10,
      sealPayloads: false,
    });
    expect(() => loadConfig({ RUNLEDGER_DB: 'mysql://u:p@localhost/runledger' })).toThrow(
      /RUNLEDGER_DB.*SQLite file path or a postgres:\/\//s,
    );
    expect(() =>
      loadConfig({ RUNLEDGER_DB: 'postgres://u:p@localhost/x', RUNLEDGER_PG_SCHEMA: 'Bad-Name' }),
    ).toThrow(/RUNLEDGER_PG_SCHEMA/);
  });

  it('keeps the files outside the database beside the SQLite file, in ./data with PostgreSQL, or in RUNLEDGER_DATA_DIR', () => {
    expect(dataDirOf(loadConfig({ RUNLEDGER_DB: '/srv/rl/runledger.db' }))).toBe('/srv/rl');
    expect(dataDirOf(loadConfig({ RUNLEDGER_DB: 'postgres://u:p@localhost/x' }))).toBe(resolve('./data'));
    expect(
      dataDirOf(loadConfig({ RUNLEDGER_DB: 'postgres://u:p@localhost/x', RUNLEDGER_DATA_DIR: '/var/rl' })),
    ).toBe('/var/rl');
  });
});

describe('checkpoints', () => {
  it('are on, every 50 events, unless configured; a bad value is refused naming the variable', () => {
    expect(loadConfig({})).toMatchObject({
      RUNLEDGER_CHECKPOINTS: 'on',
      RUNLEDGER_CHECKPOINT_EVERY_EVENTS: 50,
    });
    expect(
      loadConfig({ RUNLEDGER_CHECKPOINTS: 'off', RUNLEDGER_CHECKPOINT_EVERY_EVENTS: '7' }),
    ).toMatchObject({ RUNLEDGER_CHECKPOINTS: 'off', RUNLEDGER_CHECKPOINT_EVERY_EVENTS: 7 });
    expect(() => loadConfig({ RUNLEDGER_CHECKPOINTS: 'yes' })).toThrow(/RUNLEDGER_CHECKPOINTS/);
    expect(() => loadConfig({ RUNLEDGER_CHECKPOINT_EVERY_EVENTS: '0' })).toThrow(
      /RUNLEDGER_CHECKPOINT_EVERY_EVENTS/,
    );
  });
});

describe('leases', () => {
  it('renew every 5 s and expire after 20 s unless configured; a TTL not longer than the renewal is refused', () => {
    expect(loadConfig({})).toMatchObject({ RUNLEDGER_LEASE_RENEW_MS: 5_000, RUNLEDGER_LEASE_TTL_MS: 20_000 });
    expect(loadConfig({ RUNLEDGER_LEASE_RENEW_MS: '200', RUNLEDGER_LEASE_TTL_MS: '1000' })).toMatchObject({
      RUNLEDGER_LEASE_RENEW_MS: 200,
      RUNLEDGER_LEASE_TTL_MS: 1000,
    });
    expect(() => loadConfig({ RUNLEDGER_LEASE_RENEW_MS: '5000', RUNLEDGER_LEASE_TTL_MS: '5000' })).toThrow(
      /RUNLEDGER_LEASE_TTL_MS: 5000 must be longer than RUNLEDGER_LEASE_RENEW_MS/,
    );
    expect(() => loadConfig({ RUNLEDGER_LEASE_TTL_MS: 'soon' })).toThrow(/RUNLEDGER_LEASE_TTL_MS/);
  });
});

describe('submission backpressure', () => {
  it('bounds the queue and watches the event loop unless configured; a bad value is refused naming the variable', () => {
    expect(loadConfig({})).toMatchObject({
      RUNLEDGER_QUEUE_MAX: 10_000,
      RUNLEDGER_SUBMIT_MAX_PENDING: 1_000,
      RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: 250,
      RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: 0.9,
      RUNLEDGER_TASK_START_LOOP_UTILIZATION: 0.5,
      RUNLEDGER_TASK_START_MAX_WAIT_MS: 5_000,
    });
    expect(
      loadConfig({ RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: '0', RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '1' }),
    ).toMatchObject({ RUNLEDGER_OVERLOAD_LOOP_DELAY_MS: 0, RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: 1 });
    expect(() => loadConfig({ RUNLEDGER_QUEUE_MAX: '0' })).toThrow(/RUNLEDGER_QUEUE_MAX/);
    expect(() => loadConfig({ RUNLEDGER_SUBMIT_MAX_PENDING: 'lots' })).toThrow(
      /RUNLEDGER_SUBMIT_MAX_PENDING/,
    );
    expect(() => loadConfig({ RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '1.5' })).toThrow(
      /RUNLEDGER_OVERLOAD_LOOP_UTILIZATION/,
    );
    expect(() => loadConfig({ RUNLEDGER_OVERLOAD_LOOP_UTILIZATION: '0' })).toThrow(
      /RUNLEDGER_OVERLOAD_LOOP_UTILIZATION/,
    );
    expect(loadConfig({ RUNLEDGER_TASK_START_LOOP_UTILIZATION: '1' })).toMatchObject({
      RUNLEDGER_TASK_START_LOOP_UTILIZATION: 1,
    });
    expect(() => loadConfig({ RUNLEDGER_TASK_START_LOOP_UTILIZATION: '1.2' })).toThrow(
      /RUNLEDGER_TASK_START_LOOP_UTILIZATION/,
    );
    expect(loadConfig({ RUNLEDGER_TASK_START_MAX_WAIT_MS: '0' })).toMatchObject({
      RUNLEDGER_TASK_START_MAX_WAIT_MS: 0,
    });
    expect(() => loadConfig({ RUNLEDGER_TASK_START_MAX_WAIT_MS: '-1' })).toThrow(
      /RUNLEDGER_TASK_START_MAX_WAIT_MS/,
    );
  });
});

describe('RUNLEDGER_MODEL=openai', () => {
  it('without an orchestrator model name is a configuration error naming the variable, not a silent sys_util run', () => {
    expect(() => loadConfig({ RUNLEDGER_MODEL: 'openai' })).toThrow(
      /RUNLEDGER_MODEL_ORCHESTRATOR: RUNLEDGER_MODEL is openai but no orchestrator model is named/,
    );
    expect(loadConfig({ RUNLEDGER_MODEL: 'openai', RUNLEDGER_MODEL_ORCHESTRATOR: 'm' }).RUNLEDGER_MODEL).toBe(
      'openai',
    );
  });

  it('speaks native tool calling unless RUNLEDGER_MODEL_PROTOCOL says json', () => {
    const base = { RUNLEDGER_MODEL: 'openai', RUNLEDGER_MODEL_ORCHESTRATOR: 'm' };
    expect(loadConfig(base).RUNLEDGER_MODEL_PROTOCOL).toBe('tools');
    expect(loadConfig({ ...base, RUNLEDGER_MODEL_PROTOCOL: 'json' }).RUNLEDGER_MODEL_PROTOCOL).toBe('json');
    expect(() => loadConfig({ ...base, RUNLEDGER_MODEL_PROTOCOL: 'xml' })).toThrow(
      /RUNLEDGER_MODEL_PROTOCOL/,
    );
  });
});

describe('RUNLEDGER_AGENTS', () => {
  it('is a JSON list of agent profiles with defaults filled in; a bad or duplicate entry is refused naming the variable', () => {
    const agents = loadConfig({
      RUNLEDGER_AGENTS: JSON.stringify([
        {
          name: 'reviewer',
          description: 'reviews diffs',
          models: { orchestrator: 'big' },
          tools: ['file_read'],
        },
      ]),
    }).RUNLEDGER_AGENTS;
    expect(agents).toEqual([
      {
        name: 'reviewer',
        description: 'reviews diffs',
        models: { orchestrator: 'big' },
        tools: ['file_read'],
        instructions: '',
      },
    ]);
    expect(() => loadConfig({ RUNLEDGER_AGENTS: '[{"name":"Bad Name","description":"x"}]' })).toThrow(
      /RUNLEDGER_AGENTS/,
    );
    expect(() =>
      loadConfig({
        RUNLEDGER_AGENTS: '[{"name":"a","description":"x"},{"name":"a","description":"y"}]',
      }),
    ).toThrow(/RUNLEDGER_AGENTS.*unique/s);
    expect(loadConfig({}).RUNLEDGER_MAX_DELEGATION_DEPTH).toBe(3);
    expect(() => loadConfig({ RUNLEDGER_MAX_DELEGATION_DEPTH: '-1' })).toThrow(
      /RUNLEDGER_MAX_DELEGATION_DEPTH/,
    );
  });
});

describe('RUNLEDGER_HOOKS', () => {
  const hooks = JSON.stringify([
    {
      name: 'ci',
      secret_env: 'CI_HOOK_SECRET',
      signature: { header: 'X-Sig', prefix: 'sha256=' },
      task: { input: '{{body.x}}' },
    },
  ]);

  it('is a JSON list of hooks with defaults filled in; their secret variables are dropped with the provider keys', () => {
    const config = loadConfig({ RUNLEDGER_HOOKS: hooks, CI_HOOK_SECRET: 's3cret' });
    expect(config.RUNLEDGER_HOOKS?.[0]).toMatchObject({
      signature: { header: 'x-sig', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' },
      tolerance_s: 300,
    });
    expect(providerKeyNames(config)).toContain('CI_HOOK_SECRET');
  });

  it('a secret variable that is not set, or a bad mapping, is refused naming the variable', () => {
    expect(() => loadConfig({ RUNLEDGER_HOOKS: hooks })).toThrow(
      'RUNLEDGER_HOOKS.0.secret_env: environment variable CI_HOOK_SECRET is not set',
    );
    expect(() =>
      loadConfig({
        RUNLEDGER_HOOKS: JSON.stringify([{ name: 'ci', secret_env: 'S', task: { input: '{{x}}' } }]),
        S: 'x',
      }),
    ).toThrow(/RUNLEDGER_HOOKS\.0\.task\.input: \{\{x\}\}: must start with body/);
  });
});
