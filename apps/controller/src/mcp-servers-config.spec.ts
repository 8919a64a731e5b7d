import { ConfigError } from '@runledger/contracts';
import { loadConfig } from './config';

const servers = (list: unknown, env: Record<string, string> = {}) =>
  loadConfig({
    RUNLEDGER_DB: '/tmp/x.db',
    RUNLEDGER_MCP_SERVERS: typeof list === 'string' ? list : JSON.stringify(list),
    ...env,
  }).RUNLEDGER_MCP_SERVERS;

const bootError = (list: unknown, env: Record<string, string> = {}): string => {
  try {
    servers(list, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return `${(e as Error).message}\n${JSON.stringify((e as ConfigError).details ?? null)}`;
  }
  throw new Error('the config was accepted');
};

describe('RUNLEDGER_MCP_SERVERS', () => {
  it('parses stdio and HTTP servers with their defaults; keys stay names of variables', () => {
    expect(
      servers(
        [
          { name: 'fs', command: 'mcp-server-filesystem', args: ['.'] },
          { name: 'gh', url: 'https://mcp.example.com/mcp', headers_from: { Authorization: 'GH_TOKEN' } },
        ],
        { GH_TOKEN: 'Bearer ghp-secret' },
      ),
    ).toEqual([
      {
        name: 'fs',
        command: 'mcp-server-filesystem',
        args: ['.'],
        env_from: {},
        network: false,
        timeout_ms: 60_000,
      },
      {
        name: 'gh',
        url: 'https://mcp.example.com/mcp',
        headers_from: { Authorization: 'GH_TOKEN' },
        timeout_ms: 60_000,
      },
    ]);
  });

  it.each([
    ['not JSON', '[{oops', /RUNLEDGER_MCP_SERVERS/],
    [
      'a literal environment',
      [{ name: 'a', command: 'x', env: { KEY: 'sk-live' } }],
      /RUNLEDGER_MCP_SERVERS\.0\.env: values are not accepted here: name the environment variable that holds each in env_from/,
    ],
    [
      'literal headers',
      [{ name: 'a', url: 'http://h/mcp', headers: { Authorization: 'Bearer x' } }],
      /RUNLEDGER_MCP_SERVERS\.0\.headers: header values are not accepted here/,
    ],
    [
      'a value where a variable name goes',
      [{ name: 'a', command: 'x', env_from: { KEY: 'sk-live-1' } }],
      /RUNLEDGER_MCP_SERVERS\.0\.env_from\.KEY: must be the name of an environment variable/,
    ],
    [
      'a variable that is not set',
      [{ name: 'a', command: 'x', env_from: { KEY: 'NOT_SET_ANYWHERE' } }],
      /RUNLEDGER_MCP_SERVERS\.0\.env_from\.KEY: environment variable NOT_SET_ANYWHERE is not set/,
    ],
    [
      'a name with __',
      [{ name: 'a__b', command: 'x' }],
      /RUNLEDGER_MCP_SERVERS\.0\.name: must not contain "__"/,
    ],
    [
      'a name twice',
      [
        { name: 'a', command: 'x' },
        { name: 'a', url: 'http://h/mcp' },
      ],
      /RUNLEDGER_MCP_SERVERS\.1\.name: server a is listed twice/,
    ],
    ['an unknown field', [{ name: 'a', command: 'x', cmd: 'y' }], /RUNLEDGER_MCP_SERVERS\.0/],
    [
      'neither command nor a good url',
      [{ name: 'a', url: 'ftp://h/mcp' }],
      /RUNLEDGER_MCP_SERVERS\.0\.url: must be an http\(s\) URL/,
    ],
  ])('%s stops the boot naming the variable', (_case, list, message) => {
    expect(bootError(list)).toMatch(message);
  });

  it('a key written into the config never appears in the boot error', () => {
    expect(bootError([{ name: 'a', command: 'x', env: { KEY: 'sk-live-secret' } }])).not.toContain(
      'sk-live-secret',
    );
  });
});
