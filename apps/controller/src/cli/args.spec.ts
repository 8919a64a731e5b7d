import { ValidationError } from '@runledger/contracts';
import { parseArgs } from './args';

describe('parseArgs', () => {
  const refused = (argv: string[]) => {
    try {
      parseArgs(argv);
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      return (e as Error).message;
    }
    throw new Error(`${argv.join(' ')} was accepted`);
  };

  it('refuses an option the command does not take instead of ignoring it', () => {
    expect(refused(['resume', '--budget', 'max_rounds=2'])).toBe(
      '--budget does not apply to resume (it takes --yes, --json, --model, --force)',
    );
    expect(refused(['replay', 't1', '--yes'])).toContain('--yes does not apply to replay');
    expect(refused(['resolve', 't1', 'r1', 'deny', '--accept', '{}'])).toContain('does not apply to resolve');
    expect(refused(['serve', '--json'])).toBe('--json does not apply to serve');
    expect(refused(['rebuild', '--yes'])).toBe('--yes does not apply to rebuild (it takes --json, --force)');
    expect(parseArgs(['rebuild', '--json'])).toEqual({ kind: 'rebuild', json: true, force: false });
    expect(parseArgs(['cancel', 't1'])).toEqual({ kind: 'cancel', task_id: 't1', json: false });
    expect(refused(['cancel'])).toBe('cancel needs <task_id>');
    expect(refused(['serve', 'extra'])).toContain('serve takes no arguments');
    expect(refused(['resume', 't1', 't2'])).toBe('resume takes at most one <task_id>');
    expect(refused(['resolve', 't1', 'r1', 'deny', 'extra'])).toContain('resolve needs');
  });

  it('--model is checked when parsed (bad usage), and resume and fork take it too', () => {
    expect(refused(['run', 'x', '--model', 'gpt'])).toBe(
      '--model must be sys_util, openai or scripted:<path>, got "gpt"',
    );
    expect(parseArgs(['resume', '--model', 'scripted:s.json'])).toMatchObject({
      model: 'scripted:s.json',
      force: false,
    });
    expect(parseArgs(['resume', 't1', '--force'])).toMatchObject({ task_id: 't1', force: true });
    expect(refused(['run', 'x', '--force'])).toContain('--force does not apply to run');
    expect(parseArgs(['fork', 't1', '3', '--model', 'sys_util'])).toMatchObject({
      sequence: 3,
      model: 'sys_util',
    });
  });

  it('--help or -h after any command prints the usage', () => {
    expect(parseArgs(['run', '--help'])).toEqual({ kind: 'help' });
    expect(parseArgs(['resume', '-h'])).toEqual({ kind: 'help' });
  });

  it('resolve takes --json', () => {
    expect(parseArgs(['resolve', 't1', 'r1', 'allow_once', '--json'])).toEqual({
      kind: 'resolve',
      task_id: 't1',
      request_id: 'r1',
      decision: 'allow_once',
      json: true,
    });
  });

  it('a --budget key that does not exist is named once, with the keys that do', () => {
    expect(refused(['run', 'x', '--budget', 'foo=3'])).toBe(
      '--budget: unknown key foo (one of max_rounds, max_tool_calls, max_model_calls, max_failures, max_tokens, max_cost_usd, timeout_ms)',
    );
    expect(refused(['run', 'x', '--budget', 'max_rounds=0'])).toBe(
      '--budget: max_rounds: Too small: expected number to be >0',
    );
    expect(parseArgs(['run', 'x', '--budget', 'max_rounds=3', '--budget', 'max_cost_usd=0.5'])).toMatchObject(
      {
        budgets: { max_rounds: 3, max_cost_usd: 0.5 },
      },
    );
  });
});
