import { ValidationError } from '@runledger/contracts';
import { parseArgs } from './program';

describe('parseArgs (commander)', () => {
  const refused = (argv: string[]) => {
    try {
      parseArgs(argv);
    } catch (e) {
      expect(e).toBeInstanceOf(ValidationError);
      const message = (e as Error).message;
      expect(message).not.toContain('\n');
      return message;
    }
    throw new Error(`${argv.join(' ')} was accepted`);
  };
  const help = (argv: string[]) => {
    const parsed = parseArgs(argv);
    if (parsed.kind !== 'help') throw new Error(`${argv.join(' ')} gave ${parsed.kind}, not help`);
    return parsed.text;
  };

  it('parses every command with its arguments and options', () => {
    expect(parseArgs(['run', 'x', '-y', '--json', '--session', 's1'])).toEqual({
      kind: 'run',
      input: 'x',
      model: null,
      yes: true,
      json: true,
      budgets: {},
      accept: [],
      session: 's1',
    });
    expect(parseArgs(['run', 'x', '--session', 's1', '--on-busy', 'interrupt'])).toMatchObject({
      kind: 'run',
      session: 's1',
      on_busy: 'interrupt',
    });
    expect(() => parseArgs(['run', 'x', '--session', 's1', '--on-busy', 'later'])).toThrow(
      /--on-busy expects one of enqueue, reject, interrupt, rollback/,
    );
    expect(() => parseArgs(['run', 'x', '--on-busy', 'reject'])).toThrow(/--on-busy needs --session/);
    expect(parseArgs(['resume'])).toEqual({
      kind: 'resume',
      task_id: null,
      model: null,
      json: false,
      yes: false,
      force: false,
    });
    expect(parseArgs(['rebuild', '--json'])).toEqual({ kind: 'rebuild', json: true, force: false });
    expect(parseArgs(['backup', 'copy.db'])).toEqual({ kind: 'backup', file: 'copy.db', json: false });
    expect(parseArgs(['verify', 'copy.db', '--json'])).toEqual({
      kind: 'verify',
      target: 'copy.db',
      json: true,
    });
    expect(parseArgs(['cancel', 't1'])).toEqual({ kind: 'cancel', task_id: 't1', json: false });
    expect(parseArgs(['session-budget', 's1', '--max-tokens', '5000', '--json'])).toEqual({
      kind: 'session_budget',
      session_id: 's1',
      set: { max_tokens: 5000 },
      json: true,
    });
    expect(parseArgs(['session-budget', 's1', '--max-cost-usd', '0.5', '--max-tokens', '9'])).toMatchObject({
      set: { max_tokens: 9, max_cost_usd: 0.5 },
    });
    expect(parseArgs(['session-budget', 's1'])).toEqual({
      kind: 'session_budget',
      session_id: 's1',
      set: null,
      json: false,
    });
    expect(parseArgs(['signal', 't1', 'ci.done', '{"ok":true}', '--id', 'run-7'])).toEqual({
      kind: 'signal',
      task_id: 't1',
      name: 'ci.done',
      payload: { ok: true },
      signal_id: 'run-7',
      json: false,
      yes: false,
    });
    expect(
      parseArgs([
        'schedules',
        'create',
        '0 9 * * mon-fri',
        'standup {{date}}',
        '--time-zone',
        'Europe/Berlin',
        '--session',
        's1',
        '--budget',
        'max_rounds=3',
        '--overlap',
        'buffer_one',
        '--catch-up',
        'run_once',
        '--name',
        'standup',
      ]),
    ).toEqual({
      kind: 'schedules',
      action: 'create',
      spec: {
        cron: '0 9 * * mon-fri',
        input: 'standup {{date}}',
        time_zone: 'Europe/Berlin',
        session_id: 's1',
        budgets: { max_rounds: 3 },
        overlap: 'buffer_one',
        catch_up: 'run_once',
        name: 'standup',
      },
      json: false,
    });
    expect(parseArgs(['schedules', 'create', '* * * * *', 'x']).kind).toBe('schedules');
    expect(parseArgs(['schedules', 'list', '--json'])).toEqual({
      kind: 'schedules',
      action: 'list',
      json: true,
    });
    for (const action of ['get', 'pause', 'resume', 'delete'])
      expect(parseArgs(['schedules', action, 'sched_1'])).toEqual({
        kind: 'schedules',
        action,
        schedule_id: 'sched_1',
        json: false,
      });
    expect(parseArgs(['signal', 't1', 'ci'])).toMatchObject({
      kind: 'signal',
      payload: null,
      signal_id: null,
    });
    expect(parseArgs(['replay', 't1', '--json'])).toEqual({
      kind: 'replay',
      task_id: 't1',
      json: true,
      save: false,
    });
    expect(parseArgs(['replay', 't1', '--save'])).toEqual({
      kind: 'replay',
      task_id: 't1',
      json: false,
      save: true,
    });
    expect(parseArgs(['replay', '--bundle', 'b.json', '--json'])).toEqual({
      kind: 'replay_bundle',
      file: 'b.json',
      json: true,
    });
    expect(parseArgs(['bundle', 't1', 'b.json', '--redact', 'a+', '--redact', 'b'])).toEqual({
      kind: 'bundle',
      task_id: 't1',
      file: 'b.json',
      redact: ['a+', 'b'],
      json: false,
    });
    expect(parseArgs(['serve'])).toEqual({ kind: 'serve' });
    expect(parseArgs(['resolve', 't1', 'r1', 'allow_once', '--json'])).toEqual({
      kind: 'resolve',
      task_id: 't1',
      request_id: 'r1',
      decision: 'allow_once',
      json: true,
    });
    expect(parseArgs(['run', 'x', '--accept', '{"id":"a","kind":"output_only","match":"hi"}'])).toMatchObject(
      {
        accept: [{ id: 'a', kind: 'output_only', match: 'hi' }],
      },
    );
  });

  it('refuses an option the command does not take, naming the ones it does', () => {
    expect(refused(['resume', '--budget', 'max_rounds=2'])).toBe(
      '--budget does not apply to resume (it takes --model, --yes, --json, --force)',
    );
    expect(refused(['replay', 't1', '--yes'])).toBe(
      '--yes does not apply to replay (it takes --json, --save, --bundle)',
    );
    expect(refused(['replay', 't1', '--bundle', 'b.json'])).toBe(
      'replay: give a <task_id> or --bundle <file>, not both',
    );
    expect(refused(['replay', '--bundle', 'b.json', '--save'])).toBe(
      'replay: --save writes to a database; a --bundle replay has none',
    );
    expect(refused(['replay'])).toBe('replay: give a <task_id> or --bundle <file>');
    expect(refused(['bundle', 't1'])).toBe("missing required argument 'file'; see runledger bundle --help");
    expect(refused(['resolve', 't1', 'r1', 'deny', '--accept', '{}'])).toContain(
      '--accept does not apply to resolve',
    );
    expect(refused(['serve', '--json'])).toBe('--json does not apply to serve');
    expect(refused(['rebuild', '--yes'])).toBe('--yes does not apply to rebuild (it takes --json, --force)');
    expect(refused(['run', 'x', '--force'])).toContain('--force does not apply to run');
  });

  it('usage errors are one line with a suggestion or the help to read', () => {
    expect(refused(['rn', 'x'])).toBe("unknown command 'rn' (did you mean run?); see runledger --help");
    expect(refused(['run', 'x', '--yse'])).toBe(
      "unknown option '--yse' (did you mean --yes?); see runledger run --help",
    );
    expect(refused(['run'])).toBe("missing required argument 'input'; see runledger run --help");
    expect(refused(['cancel'])).toBe("missing required argument 'task_id'; see runledger cancel --help");
    expect(refused(['session-budget', 's1', '--max-tokens', '0'])).toMatch(/^session-budget: --max-tokens /);
    expect(refused(['session-budget', 's1', '--max-cost-usd', 'lots'])).toMatch(/--max-cost-usd/);
    expect(refused(['signal', 't1', 'ci', '{not json'])).toMatch(/payload\] must be JSON/);
    expect(refused(['signal', 't1', '-bad'])).toBeTruthy();
    expect(refused(['signal', 't1', 'bad name'])).toMatch(/signal: <name>/);
    expect(refused(['schedules', 'create', '* * * * *', 'x', '--overlap', 'never'])).toBe(
      "option '--overlap <policy>' argument 'never' is invalid. Allowed choices are skip, buffer_one, allow; see runledger schedules create --help",
    );
    expect(refused(['schedules', 'create', 'x'])).toBe(
      "missing required argument 'input'; see runledger schedules create --help",
    );
    expect(refused(['schedules', 'create', '* * * * *', ''])).toMatch(/^schedules create: input: /);
    expect(refused(['schedules', 'pause'])).toBe(
      "missing required argument 'schedule_id'; see runledger schedules pause --help",
    );
    expect(refused(['schedules', 'stop', 'x'])).toMatch(/^unknown command 'stop'/);
    expect(refused(['resume', 't1', 't2'])).toMatch(/^too many arguments for 'resume'/);
    expect(refused(['serve', 'extra'])).toMatch(/^too many arguments for 'serve'/);
    expect(refused(['resolve', 't1', 'r1', 'maybe'])).toContain(
      'Allowed choices are allow_once, allow_always, deny, ask_always',
    );
    expect(refused(['fork', 't1', 'x'])).toBe('fork: <sequence> must be a whole number from 1, got "x"');
    expect(refused(['fork', 't1', '0'])).toContain('<sequence> must be a whole number from 1');
    expect(refused(['run', '  '])).toBe('run needs a non-empty input (quote it)');
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
    expect(parseArgs(['fork', 't1', '3', '--model', 'sys_util'])).toMatchObject({
      sequence: 3,
      model: 'sys_util',
    });
  });

  it("a command's --help shows only that command's options; the global help lists the commands", () => {
    const run = help(['run', '--help']);
    expect(run).toMatch(/^Usage: runledger run \[options\] <input>/);
    for (const flag of ['--model', '--yes', '--json', '--budget', '--accept', '--session', '--on-busy'])
      expect(run).toContain(flag);
    expect(run).not.toContain('--force');
    expect(run).not.toContain('resume');
    const replay = help(['replay', '-h']);
    expect(replay).toContain('--json');
    expect(replay).not.toContain('--yes');
    expect(help(['help', 'cancel'])).toMatch(/^Usage: runledger cancel \[options\] <task_id>/);

    const global = help([]);
    expect(help(['--help'])).toBe(global);
    for (const command of [
      'run',
      'resume',
      'resolve',
      'replay',
      'fork',
      'cancel',
      'rebuild',
      'backup',
      'verify',
      'serve',
    ])
      expect(global).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(global).toContain('2  bad usage');
    expect(global).not.toContain('--budget');
  });

  it('a --budget key that does not exist is named once, with the keys that do', () => {
    expect(refused(['run', 'x', '--budget', 'foo=3'])).toBe(
      '--budget: unknown key foo (one of max_rounds, max_tool_calls, max_model_calls, max_failures, max_tokens, max_cost_usd, timeout_ms, session_max_tokens, session_max_cost_usd)',
    );
    expect(refused(['run', 'x', '--budget', 'max_rounds=0'])).toBe(
      '--budget: max_rounds: Too small: expected number to be >0',
    );
    expect(refused(['run', 'x', '--budget', 'max_rounds=abc'])).toBe(
      '--budget expects key=number, got "max_rounds=abc"',
    );
    expect(parseArgs(['run', 'x', '--budget', 'max_rounds=3', '--budget', 'max_cost_usd=0.5'])).toMatchObject(
      { budgets: { max_rounds: 3, max_cost_usd: 0.5 } },
    );
  });
});
