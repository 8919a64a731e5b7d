import { manifestOf } from '@runledger/testing';
import { McpClientManager } from '@runledger/tools';
import { mcpListing, mcpListingText } from './mcp-list';
import { parseArgs } from './program';

const manifest = (name: string, description: string, read_only: boolean) =>
  manifestOf(name, { description, args_schema: {}, requires_permission: true, read_only });
const manager = {
  status: () => [
    {
      name: 'fs',
      transport: 'stdio',
      state: 'ready',
      tools: ['mcp__fs__read', 'mcp__fs__write'],
      error: null,
      restarts: 0,
      pid: 7,
    },
    {
      name: 'gh',
      transport: 'http',
      state: 'failed',
      tools: [],
      error: 'fetch failed',
      restarts: 2,
      pid: null,
    },
  ],
  get: (name: string) =>
    ({
      mcp__fs__read: { entry: { manifest: manifest('mcp__fs__read', 'Read a file\nmore words', true) } },
      mcp__fs__write: { entry: { manifest: manifest('mcp__fs__write', 'Write a file', false) } },
    })[name],
} as unknown as McpClientManager;

describe('runledger mcp list', () => {
  it('parses, with --json; its help is its own', () => {
    expect(parseArgs(['mcp', 'list'])).toEqual({ kind: 'mcp_list', json: false });
    expect(parseArgs(['mcp', 'list', '--json'])).toEqual({ kind: 'mcp_list', json: true });
    expect(() => parseArgs(['mcp', 'lst'])).toThrow(/unknown command 'lst'/);
  });

  it('shows each server with its state and tools, or why it is down', () => {
    expect(mcpListingText(mcpListing(manager))).toBe(
      [
        'fs  stdio  ready  2 tool(s)',
        '  mcp__fs__read [read-only]  Read a file',
        '  mcp__fs__write  Write a file',
        'gh  http  failed  fetch failed',
      ].join('\n'),
    );
    expect(mcpListing(manager)[0].tools[0]).toEqual({
      name: 'mcp__fs__read',
      description: 'Read a file\nmore words',
      read_only: true,
      idempotent: false,
    });
  });

  it('says when none is configured', () => {
    expect(mcpListingText([])).toBe('no MCP servers configured (RUNLEDGER_MCP_SERVERS)');
  });
});
