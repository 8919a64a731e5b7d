import { ToolManifest } from '@runledger/contracts';
import { RulePermissionPolicy } from './rule-permission-policy';

const mcpTool = (name: string, read_only = false): ToolManifest => ({
  name,
  description: name,
  args_schema: { type: 'object' },
  requires_permission: true,
  idempotent: false,
  timeout_ms: 1000,
  secrets: [],
  sensitive_output: false,
  entry: 'index.js',
  read_only,
});
const verdict = (rules: ConstructorParameters<typeof RulePermissionPolicy>[0]['rules'], tool: ToolManifest) =>
  new RulePermissionPolicy({ allowedRoot: '/tmp', rules }).check({
    manifest: tool,
    args: {},
    session_id: 's',
  });

describe('MCP tools and the permission rules', () => {
  it('ask first by default, read-only or not', () => {
    expect(verdict({}, mcpTool('mcp__gh__search', true))).toMatchObject({
      verdict: 'prompt',
      rule: 'mcp_tool',
    });
    expect(verdict({}, mcpTool('mcp__gh__delete_repo'))).toMatchObject({
      verdict: 'prompt',
      rule: 'mcp_tool',
    });
  });

  it('a rule allows a whole server, or one tool (with or without the prefix)', () => {
    expect(verdict({ mcp_allow: ['gh'] }, mcpTool('mcp__gh__delete_repo')).verdict).toBe('allow');
    expect(verdict({ mcp_allow: ['gh__search'] }, mcpTool('mcp__gh__search')).verdict).toBe('allow');
    expect(verdict({ mcp_allow: ['mcp__gh__search'] }, mcpTool('mcp__gh__search')).verdict).toBe('allow');
    expect(verdict({ mcp_allow: ['gh__search'] }, mcpTool('mcp__gh__search_all')).verdict).toBe('prompt');
    // a server named like the start of another is not it
    expect(verdict({ mcp_allow: ['g'] }, mcpTool('mcp__gh__search')).verdict).toBe('prompt');
  });

  it('mcp_allow_read_only lets tools annotated readOnlyHint run, and only those', () => {
    const rules = { mcp_allow_read_only: true };
    expect(verdict(rules, mcpTool('mcp__fs__read_file', true)).verdict).toBe('allow');
    expect(verdict(rules, mcpTool('mcp__fs__write_file', false)).verdict).toBe('prompt');
  });

  it('a deny rule wins over every allow', () => {
    const rules = { mcp_allow: ['fs'], mcp_allow_read_only: true, mcp_deny: ['fs__read_file'] };
    expect(verdict(rules, mcpTool('mcp__fs__read_file', true))).toMatchObject({
      verdict: 'deny',
      rule: 'mcp_deny',
    });
    expect(verdict({ mcp_deny: ['fs'] }, mcpTool('mcp__fs__list', true)).verdict).toBe('deny');
  });

  it('an allow_always answer covers that one tool, and the person is told so', () => {
    const policy = new RulePermissionPolicy({ allowedRoot: '/tmp' });
    expect(policy.allowAlwaysCovers('mcp__gh__search', 'mcp_tool')).toBe(
      'allow always: mcp__gh__search, every call of this MCP tool, whatever its arguments, for this session (rule mcp_tool)',
    );
  });
});
