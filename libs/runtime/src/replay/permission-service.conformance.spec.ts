import { RuntimeEvent } from '@runledger/contracts';
import { RulePermissionPolicy } from '@runledger/permissions';
import { ReplayPermissionPolicy } from './recorded-parts';
import { CONFORMANCE_FILE, runPermissionServiceConformance } from '../testing/permission-service-conformance';
import { AllowAllPolicy, RuleTablePolicy } from '../testing/test-tools';

runPermissionServiceConformance('the rule policy (built-in rules)', (root) => ({
  sut: new RulePermissionPolicy({ allowedRoot: root }),
  draws: {
    allow: { tool: 'file_read', args: { path: CONFORMANCE_FILE } },
    prompt: { tool: 'shell_exec', args: { command: 'touch made.txt' } },
    deny: { tool: 'file_read', args: { path: '/etc/hostname' } },
    hard_stop: { tool: 'shell_exec', args: { command: 'rm -rf /' } },
  },
}));

runPermissionServiceConformance('a table of verdicts per tool', () => ({
  sut: new RuleTablePolicy({ echo: 'prompt', append_line: 'deny', shell_exec: 'hard_stop' }),
  draws: {
    allow: { tool: 'file_read', args: { path: CONFORMANCE_FILE } },
    prompt: { tool: 'echo', args: { text: 'hi' } },
    deny: { tool: 'append_line', args: { path: 'log.txt', line: 'x' } },
    hard_stop: { tool: 'shell_exec', args: { command: 'echo stop' } },
  },
}));

runPermissionServiceConformance('allow everything', () => ({
  sut: new AllowAllPolicy(),
  draws: { allow: { tool: 'file_read', args: { path: CONFORMANCE_FILE } } },
}));

/** A recording's permission outcomes as its log holds them: a call that ran, one denied, one hard-stopped. */
const recording = (): RuntimeEvent[] =>
  [
    { type: 'TOOL_CALLED', payload: { call_id: 'call_1', tool: 'file_read' } },
    {
      type: 'TOOL_FAILED',
      payload: {
        call_id: 'call_2',
        tool: 'append_line',
        error_kind: 'permission_denied',
        error: 'append_line is deny',
      },
    },
    {
      type: 'TOOL_FAILED',
      payload: {
        call_id: 'call_3',
        tool: 'shell_exec',
        error_kind: 'hard_stop',
        error: 'shell_exec is hard_stop',
      },
    },
  ] as unknown as RuntimeEvent[];

runPermissionServiceConformance("a recording's replay", () => ({
  sut: new ReplayPermissionPolicy(recording()),
  draws: {
    allow: { tool: 'file_read', args: { path: CONFORMANCE_FILE } },
    deny: { tool: 'append_line', args: { path: 'log.txt', line: 'x' } },
    hard_stop: { tool: 'shell_exec', args: { command: 'echo stop' } },
  },
}));
