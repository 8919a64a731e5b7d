import fc from 'fast-check';
import { ContextBuilder, DEFAULT_SECTION_BUDGETS, elideOutput } from './context-builder';
import { promptBudgetTokens } from '../discipline/prompt-budget';
import { DEFAULT_DISCIPLINE_SETTINGS, PromptSettings, disciplineSettingsFrom } from '../discipline/settings';
import { EventLogBuilder } from '../discipline/testing-events';
import { NoMemoryRecall } from '../ports';
import { evolveProgress, foldProgress } from '../log/progress';

const defaults = DEFAULT_DISCIPLINE_SETTINGS.prompt;
const builder = (prompt: PromptSettings = defaults) =>
  new ContextBuilder(new NoMemoryRecall(), DEFAULT_SECTION_BUDGETS, 5, prompt);
const progressOf = (log: EventLogBuilder) => foldProgress(log.taskId, log.events);
const shell = (stdout: string) => ({ stdout, stderr: '', exit_code: 0 });
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

describe('ContextBuilder: a context that always fits', () => {
  it('elides a 60 KB tool output under the default budget: head and tail kept, the event holding it named', async () => {
    const output = `HEAD${'a'.repeat(60_000)}TAIL`;
    const log = new EventLogBuilder()
      .received('run big')
      .toolRound('shell_exec', { command: 'big' }, shell(output));
    const completed = log.events.find((e) => e.type === 'TOOL_COMPLETED')!;

    const sut = await builder().build(progressOf(log), 2, []);

    expect(sut.overBudget).toBeUndefined();
    const prompt = sut.messages[1].content;
    const note = new RegExp(
      `\\[… (\\d+) bytes elided; whole output in event ${completed.event_id} …\\]`,
    ).exec(prompt);
    expect(note).not.toBeNull();
    expect(prompt).toContain('shell_exec: HEADaaa');
    expect(prompt).toContain('aaaTAIL');
    const shownChars = prompt.length - note![0].length;
    // what is shown plus what is elided is the whole output (all ASCII here: one byte a character)
    expect(Number(note![1])).toBeGreaterThan(60_008 - shownChars);
    expect(Number(note![1])).toBeLessThan(60_008);
    expect(sut.event.cut).toContain('history:round_1:elided');
    expect(sut.event.total_tokens).toBeLessThanOrEqual(sut.event.budget_tokens);
    // the model-free orchestrator answers with the output whole, so its view is not elided
    expect(sut.view.history[0].results[0]).toBe(`shell_exec: ${output}`);
  });

  it('two large outputs in a row share the history section: both elided, neither cut at its end', async () => {
    const log = new EventLogBuilder()
      .received('two big commands')
      .toolRound('shell_exec', { command: 'one' }, shell(`${'1'.repeat(40_000)}END1`))
      .toolRound('shell_exec', { command: 'two' }, shell(`${'2'.repeat(40_000)}END2`));

    const sut = await builder().build(progressOf(log), 3, []);

    expect(sut.overBudget).toBeUndefined();
    expect(sut.event.cut).toEqual(['history:round_1:elided', 'history:round_2:elided']);
    expect(sut.messages[1].content).toContain('END1');
    expect(sut.messages[1].content).toContain('END2');
    expect(sut.event.total_tokens).toBeLessThanOrEqual(sut.event.budget_tokens);
  });

  it('CONTEXT_BUILT reports the budget of the configured window; a window that holds the output shows it whole', async () => {
    const wide = disciplineSettingsFrom({ RUNLEDGER_CONTEXT_WINDOW_TOKENS: 32_000 }).prompt;
    const output = 'b'.repeat(60_000);
    const log = new EventLogBuilder()
      .received('run big')
      .toolRound('shell_exec', { command: 'big' }, shell(output));

    const narrow = await builder().build(progressOf(log), 2, []);
    const sut = await builder(wide).build(progressOf(log), 2, []);

    expect(narrow.event.budget_tokens).toBe(promptBudgetTokens(defaults));
    expect(sut.event.budget_tokens).toBe(
      Math.floor((32_000 - defaults.maxTokens) * (1 - defaults.safetyMargin)),
    );
    expect(sut.messages[1].content).toContain(output);
    expect(sut.event.cut).toEqual([]);
  });

  it('compacts older tool turns first and keeps the newest ones whole', async () => {
    const log = new EventLogBuilder().received('six commands');
    for (let i = 1; i <= 6; i++)
      log.toolRound('shell_exec', { command: `c${i}` }, shell(`${i}`.repeat(8000)));

    const sut = await builder().build(progressOf(log), 7, [], undefined, { canCompact: true });

    expect(sut.overBudget).toBeUndefined();
    expect(sut.compaction?.rounds).toEqual([1, 2, 3, 4]);
    expect(sut.messages[1].content).toContain('5'.repeat(8000));
    expect(sut.messages[1].content).toContain('6'.repeat(8000));
    expect(sut.messages[1].content).not.toContain('elided');
  });

  it('hands the summariser the old rounds with their outputs elided as the budget weighed them', async () => {
    const log = new EventLogBuilder().received('a huge output, then five commands');
    log.toolRound('shell_exec', { command: 'huge' }, shell('h'.repeat(60_000)));
    for (let i = 2; i <= 6; i++)
      log.toolRound('shell_exec', { command: `c${i}` }, shell(`${i}`.repeat(8000)));

    const sut = await builder().build(progressOf(log), 7, [], undefined, { canCompact: true });

    expect(sut.compaction?.rounds).toContain(1);
    expect(sut.compaction!.text).toMatch(/bytes elided; whole output in event/);
    expect(sut.compaction!.text.length).toBeLessThan(60_000);
  });

  it("shows the task's input whole when the window holds it, and stops when it does not", async () => {
    const input = `${'i'.repeat(30_000)}END`;
    const log = new EventLogBuilder().received(input);

    const wide = await builder(
      disciplineSettingsFrom({ RUNLEDGER_CONTEXT_WINDOW_TOKENS: 32_000 }).prompt,
    ).build(progressOf(log), 1, []);
    const sut = await builder().build(progressOf(log), 1, []);

    expect(wide.overBudget).toBeUndefined();
    expect(wide.messages[1].content).toContain(input);
    expect(wide.event.cut).toEqual([]);
    expect(sut.overBudget).toMatch(/user input alone need \d+ tokens; the prompt budget is 6451/);
  });

  it('stops with budget_exceeded only when the system prompt and the user input alone overflow the window', async () => {
    const small = { ...defaults, contextWindowTokens: 2_000 };
    const bigOutput = new EventLogBuilder()
      .received('run big')
      .toolRound('shell_exec', { command: 'big' }, shell('c'.repeat(60_000)));
    const bigInput = new EventLogBuilder().received('x'.repeat(15_000));

    const fits = await builder(small).build(progressOf(bigOutput), 2, []);
    const sut = await builder(small).build(progressOf(bigInput), 1, []);

    expect(fits.overBudget).toBeUndefined();
    expect(fits.event.total_tokens).toBeLessThanOrEqual(promptBudgetTokens(small));
    expect(sut.overBudget).toMatch(
      /system prompt, tool list and user input alone need \d+ tokens; the prompt budget is 878/,
    );
  });
});

describe('ContextBuilder: any outputs, any window', () => {
  it('the prompt stays within the budget, never clipped at its end; only the fixed sections can stop a task', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: 80_000 }), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1_500, max: 40_000 }),
        fc.boolean(),
        async (outputs, window, canCompact) => {
          const log = new EventLogBuilder().received('probe');
          outputs.forEach((n, i) => log.toolRound('shell_exec', { command: `c${i}` }, shell('z'.repeat(n))));
          const prompt = { ...defaults, contextWindowTokens: window };

          const sut = await builder(prompt).build(progressOf(log), outputs.length + 1, [], undefined, {
            canCompact,
          });

          if (sut.overBudget) return expect(sut.overBudget).toMatch(/user input alone need/);
          expect(sut.event.total_tokens).toBeLessThanOrEqual(sut.event.budget_tokens);
          expect(sut.event.cut).not.toContain('history:truncated');
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('ContextBuilder: renderings kept across rounds', () => {
  const settings = [
    ['the default window', defaults],
    ['a small window', { ...defaults, contextWindowTokens: 3_000, maxTokens: 500 }],
    ['fixed section budgets (no run discipline)', null],
  ] as const;

  it.each(settings)(
    'with %s, a builder that built every earlier round gives the context a new builder gives',
    async (_name, prompt) => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({
              output: fc.integer({ min: 0, max: 30_000 }),
              ok: fc.boolean(),
              // a note the completion guard adds to a round the builder already rendered
              note: fc.boolean(),
              compact: fc.boolean(),
            }),
            { minLength: 1, maxLength: 25 },
          ),
          fc.boolean(),
          fc.boolean(),
          async (rounds, toolCalling, canCompact) => {
            const log = new EventLogBuilder().received('probe');
            const progress = progressOf(log);
            let applied = log.events.length;
            const catchUp = () => {
              while (applied < log.events.length) evolveProgress(progress, log.events[applied++]);
            };
            const sut = new ContextBuilder(new NoMemoryRecall(), DEFAULT_SECTION_BUDGETS, 5, prompt);
            for (const [i, r] of rounds.entries()) {
              log.toolRound('shell_exec', { command: `c${i}` }, shell('o'.repeat(r.output)), r.ok);
              catchUp();
              await sut.build(progress, i + 2, [], undefined, { toolCalling, canCompact });
              if (r.note)
                log.add('GUARD_TRIGGERED', {
                  guard: 'completion_reminder',
                  round: i + 1,
                  detail: `reminded in round ${i + 1}`,
                  data: {},
                });
              if (r.compact && progress.history.length > 2)
                log.add('GUARD_TRIGGERED', {
                  guard: 'compaction',
                  round: i + 1,
                  detail: 'compacted',
                  data: { rounds: progress.history.slice(0, 2).map((h) => h.round), summary: `up to ${i}` },
                });
              catchUp();

              const warm = await sut.build(progress, i + 2, [], undefined, { toolCalling, canCompact });
              const fresh = await new ContextBuilder(
                new NoMemoryRecall(),
                DEFAULT_SECTION_BUDGETS,
                5,
                prompt,
              ).build(progress, i + 2, [], undefined, { toolCalling, canCompact });

              expect(warm).toEqual(fresh);
            }
          },
        ),
        { numRuns: 25 },
      );
    },
  );
});

describe('elideOutput', () => {
  it('leaves an output that fits as it is', () => {
    expect(elideOutput('short', 5, 'evt_1')).toBe('short');
  });

  it('keeps head and tail within the limit and counts the elided bytes', () => {
    const sut = elideOutput(`${'h'.repeat(500)}${'é'.repeat(1000)}${'t'.repeat(500)}`, 300, 'evt_9');
    expect(sut.length).toBeLessThanOrEqual(300);
    expect(sut).toMatch(/^h+\n\[… \d+ bytes elided; whole output in event evt_9 …\]\nt+$/);
    const [, bytes] = /(\d+) bytes/.exec(sut)!;
    const kept = sut.replace(/\n\[.*\]\n/, '');
    expect(Number(bytes)).toBe(500 + 2000 + 500 - kept.length);
  });

  it('never splits a surrogate pair', () => {
    for (const max of [100, 101, 102, 103]) {
      const sut = elideOutput('😀'.repeat(1000), max, null);
      expect(sut.length).toBeLessThanOrEqual(max);
      expect(sut).toMatch(/bytes elided …/);
      expect(loneSurrogate.test(sut)).toBe(false);
    }
  });
});

describe("ContextBuilder: the session's earlier tasks", () => {
  const withSession = (answers: string[]) => {
    const log = new EventLogBuilder();
    log.received('and now?', {
      session_history: answers.map((answer, i) => ({
        task_id: `task_${i + 1}`,
        input: `question ${i + 1}`,
        answer,
        stop_reason: 'completed' as const,
      })),
    });
    return log;
  };

  it('come first in the history, oldest first, and the model-free orchestrator does not take them for results', async () => {
    const log = withSession(['one', 'two']).toolRound('shell_exec', { command: 'ls' }, shell('a.txt'));

    const sut = await builder().build(progressOf(log), 2, []);

    const prompt = sut.messages[1].content;
    const order = ['(task_1)', 'answer (completed): one', '(task_2)', 'answer (completed): two', 'Round 1'];
    const at = order.map((s) => prompt.indexOf(s));
    expect(at.every((i) => i >= 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    expect(sut.view.history.map((h) => h.round)).toEqual([1]);
  });

  it('under fixed section budgets the oldest go first, and the prompt says how many', async () => {
    const log = withSession(['a'.repeat(6000), 'b'.repeat(6000), 'c'.repeat(6000), 'd'.repeat(100)]);
    const sut = new ContextBuilder(new NoMemoryRecall(), { ...DEFAULT_SECTION_BUDGETS, history: 1000 });

    const built = await sut.build(progressOf(log), 1, []);

    const prompt = built.messages[1].content;
    expect(prompt).toContain('[… 3 earlier tasks of this session left out to fit the prompt …]');
    expect(prompt).toContain('answer (completed): dddd');
    expect(prompt).not.toContain('aaaa');
    expect(built.event.cut).toEqual(['history:session_4..session_2']);
  });
});
