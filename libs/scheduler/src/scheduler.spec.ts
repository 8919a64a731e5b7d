import { StepStatus, blockedSteps, findCycle, readySteps } from './graph';
import { parsePlan } from './plan';
import { UnknownStepReferenceError, referencedSteps, substituteOutputs } from './substitute';
import { planStep as step } from './testing/plan-step';

describe('parsePlan', () => {
  it('accepts a steps array, an object with steps, or its JSON text, applying defaults', () => {
    const sut = parsePlan('{"steps":[{"id":"a","kind":"tool","tool":"echo"}]}');
    expect(sut).toEqual({ ok: true, steps: [step('a')] });
    expect(parsePlan([{ id: 'a', kind: 'respond' }]).ok).toBe(true);
  });

  it.each([
    ['not json', /not valid JSON/],
    ['[]', /at least 1|>=1|too small/i],
    [
      JSON.stringify([
        { id: 'a', kind: 'tool', tool: 'echo' },
        { id: 'a', kind: 'tool', tool: 'echo' },
      ]),
      /duplicate step id a/,
    ],
    [JSON.stringify([{ id: 'a', kind: 'tool', tool: 'echo', depends_on: ['zz'] }]), /unknown step zz/],
    [JSON.stringify([{ id: 'a', kind: 'tool' }]), /without a tool/],
    [JSON.stringify([{ id: 'a', kind: 'dance' }]), /kind/],
    [
      JSON.stringify([
        { id: 'a', kind: 'tool', tool: 'echo' },
        { id: 'b', kind: 'tool', tool: 'echo', args: { t: '${steps.a.output}' } },
      ]),
      /b uses the output of a without depending on it/,
    ],
  ])('refuses %s', (input, message) => {
    const sut = parsePlan(input);
    expect(sut.ok).toBe(false);
    expect(!sut.ok && sut.error).toMatch(message);
  });
});

describe('findCycle', () => {
  it('names the cycle from its first step back to it', () => {
    expect(findCycle([step('a', ['c']), step('b', ['a']), step('c', ['b'])])).toEqual(['a', 'c', 'b', 'a']);
    expect(findCycle([step('x', ['x'])])).toEqual(['x', 'x']);
  });

  it('is null for a DAG, including diamonds', () => {
    expect(findCycle([step('a'), step('b', ['a']), step('c', ['a']), step('d', ['b', 'c'])])).toBeNull();
  });
});

describe('readySteps / blockedSteps', () => {
  const plan = [step('a'), step('b'), step('c', ['a', 'b']), step('d', ['c'])];

  it('starts independent steps together, up to the concurrency limit, in plan order', () => {
    expect(readySteps(plan, new Map(), 4).map((s) => s.id)).toEqual(['a', 'b']);
    expect(readySteps(plan, new Map(), 1).map((s) => s.id)).toEqual(['a']);
    expect(readySteps(plan, new Map<string, StepStatus>([['a', 'running']]), 1)).toEqual([]);
  });

  it('a step waits for all its dependencies to complete', () => {
    expect(
      readySteps(
        plan,
        new Map<string, StepStatus>([
          ['a', 'completed'],
          ['b', 'running'],
        ]),
        4,
      ),
    ).toEqual([]);
    expect(
      readySteps(
        plan,
        new Map<string, StepStatus>([
          ['a', 'completed'],
          ['b', 'completed'],
        ]),
        4,
      ).map((s) => s.id),
    ).toEqual(['c']);
  });

  it('everything downstream of a failed step is blocked', () => {
    expect(blockedSteps(plan, new Map<string, StepStatus>([['a', 'failed']])).map((s) => s.id)).toEqual([
      'c',
      'd',
    ]);
  });
});

describe('substituteOutputs', () => {
  const outputs = new Map<string, unknown>([
    ['a', { n: 1 }],
    ['b', 'text'],
  ]);

  it('a whole-string reference keeps the output type; an embedded one becomes text', () => {
    expect(
      substituteOutputs(
        {
          x: '${steps.a.output}',
          y: 'got ${steps.b.output} and ${steps.a.output}',
          z: ['${steps.b.output}'],
        },
        outputs,
      ),
    ).toEqual({
      x: { n: 1 },
      y: 'got text and {"n":1}',
      z: ['text'],
    });
  });

  it('a reference to a step without output throws; references can be listed up front', () => {
    expect(() => substituteOutputs({ x: '${steps.zz.output}' }, outputs)).toThrow(UnknownStepReferenceError);
    expect(
      referencedSteps({ a: '${steps.s1.output}', b: ['${steps.s2.output} ${steps.s1.output}'] }),
    ).toEqual(['s1', 's2']);
  });
});
