import { ValidationError } from '@runledger/contracts';
import { InboundHookConfig, InboundHooksConfig } from './hook-config';
import { HookDelivery, mapDelivery } from './hook-mapping';

const hookOf = (h: Record<string, unknown>): InboundHookConfig =>
  InboundHooksConfig.parse([{ name: 'ci', secret_env: 'CI_SECRET', ...h }])[0];

const delivery = (body: unknown, headers: Record<string, string> = {}): HookDelivery => ({
  hook: 'ci',
  delivery_id: 'd-1',
  body,
  headers,
});

describe('hook mapping', () => {
  it('fills a task from the body, the headers and the delivery', () => {
    const sut = hookOf({
      task: {
        input:
          'CI {{body.run.conclusion}} on {{ headers.x-event }} ({{delivery_id}}, {{hook}}): {{body.run.files}}',
        session_id: 'repo-{{body.repo.id}}',
        on_busy: 'enqueue',
      },
    });
    const action = mapDelivery(
      sut,
      delivery(
        { run: { conclusion: 'failure', files: ['a.ts'] }, repo: { id: 7 } },
        { 'x-event': 'workflow_run' },
      ),
    );
    expect(action).toEqual({
      action: 'task',
      task: {
        input: 'CI failure on workflow_run (d-1, ci): ["a.ts"]',
        session_id: 'repo-7',
        on_busy: 'enqueue',
      },
    });
  });

  it('a signal to the task a header names, its payload a part of the body', () => {
    const sut = hookOf({
      signal: { task_id: '{{headers.x-task}}', name: 'ci_{{body.state}}', payload: 'body.run' },
    });
    expect(mapDelivery(sut, delivery({ state: 'done', run: { n: 1 } }, { 'x-task': 'task_abc' }))).toEqual({
      action: 'signal',
      task_id: 'task_abc',
      name: 'ci_done',
      payload: { n: 1 },
    });
  });

  it('names every value the delivery lacks, and refuses a task id that names another stream', () => {
    const sut = hookOf({ signal: { task_id: '{{body.task}}', name: '{{body.name}}', payload: 'body.data' } });
    let err: unknown;
    try {
      mapDelivery(sut, delivery({ name: 'x' }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).details).toEqual({
      hook: 'ci',
      missing: ['signal.payload: body.data', 'signal.task_id: {{body.task}}'],
    });
    expect(() => mapDelivery(sut, delivery({ task: 'system:schedules', name: 'x', data: 1 }))).toThrow(
      /is not a task id/,
    );
  });

  it('`when`: a delivery without the values asked for is ignored; a list accepts any of its values', () => {
    const sut = hookOf({
      when: { 'headers.x-event': ['push', 'workflow_run'], 'body.action': 'completed' },
      task: { input: '{{body.action}}' },
    });
    expect(mapDelivery(sut, delivery({ action: 'completed' }, { 'x-event': 'push' })).action).toBe('task');
    expect(mapDelivery(sut, delivery({ action: 'requested' }, { 'x-event': 'push' })).action).toBe('ignored');
    expect(mapDelivery(sut, delivery({ action: 'completed' }, { 'x-event': 'issues' })).action).toBe(
      'ignored',
    );
    expect(mapDelivery(sut, delivery({ action: { x: 1 } }, { 'x-event': 'push' })).action).toBe('ignored');
  });

  it('configuration refusals name the problem: bad placeholders, both or no action, a secret, duplicate names', () => {
    const problems = (hooks: unknown) =>
      InboundHooksConfig.safeParse(hooks).error?.issues.map((i) => i.message) ?? [];
    expect(problems([{ name: 'a', secret_env: 'S', task: { input: '{{payload.x}}' } }])).toEqual([
      '{{payload.x}}: must start with body, headers, delivery_id or hook',
    ]);
    expect(problems([{ name: 'a', secret_env: 'S' }])).toEqual([
      'a hook maps its deliveries to exactly one of "task" or "signal"',
    ]);
    expect(problems([{ name: 'a', secret_env: 'S', secret: 'x', task: { input: 'i' } }])[0]).toMatch(
      /name the environment variable that holds it in secret_env/,
    );
    expect(
      problems([
        { name: 'a', secret_env: 'S', task: { input: 'i' } },
        { name: 'a', secret_env: 'T', task: { input: 'j' } },
      ]),
    ).toEqual(['hook names must be unique']);
    expect(
      problems([
        { name: 'a', secret_env: 'S', signal: { task_id: '{{body.t}}', name: 'n', payload: 'headers.a.b' } },
      ]),
    ).toEqual(['a header is headers.<name>']);
  });
});
