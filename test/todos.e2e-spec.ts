import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '@runledger/testing';
import { ApiHarness, bootApi, waitForTask } from './api-harness';

/** Todos through the front doors: GET /tasks/:id lists them, a fork carries them over, the CLI prints them. */

const plan = JSON.stringify({
  type: 'plan',
  steps: [{ id: 's1', kind: 'tool', tool: 'echo', args: { text: 'a' } }],
  todos: [
    { id: 'parse', text: 'parse the input' },
    { id: 'tests', text: 'add the tests' },
  ],
});
const update = (id: string, status: string) =>
  JSON.stringify({ type: 'tool', tool: 'todo_update', args: { id, status } });
const respond = (content: string) => JSON.stringify({ type: 'respond', content });

describe('todos on GET /tasks/:id and in a fork', () => {
  let sut: ApiHarness;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-todos-api-'));
    const script = join(dir, 'script.json');
    writeFileSync(
      script,
      JSON.stringify({ orchestrator: [plan, update('parse', 'done'), respond('half done')] }),
    );
    sut = await bootApi(
      { RUNLEDGER_MODEL: `scripted:${script}`, RUNLEDGER_MEMORY: 'off' },
      { checkResponses: true },
    );
  });
  afterAll(async () => {
    await sut.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists the todos with status and owner; the open required one fails acceptance; a fork starts with the same list', async () => {
    const post = await sut.request('POST', '/tasks', { body: { input: 'parse and test' } });
    const view = await waitForTask(sut, post.body.task_id);
    expect(view.stop_reason).toBe('accept_check_failed');
    expect(view.stop_detail).toContain('tests (pending: add the tests)');
    expect(view.todos).toEqual([
      {
        id: 'parse',
        text: 'parse the input',
        required: true,
        status: 'done',
        note: null,
        owner: { kind: 'plan', plan_id: 'plan_1' },
        active: true,
      },
      {
        id: 'tests',
        text: 'add the tests',
        required: true,
        status: 'pending',
        note: null,
        owner: { kind: 'plan', plan_id: 'plan_1' },
        active: true,
      },
    ]);
    const events = await sut.request('GET', `/tasks/${post.body.task_id}/events?limit=100`);
    const lastTodo = (events.body.events as Array<{ type: string; sequence: number }>)
      .filter((e) => e.type === 'TODO_UPDATED')
      .pop()!;
    const fork = await sut.request('POST', `/tasks/${post.body.task_id}/fork`, {
      body: { at_sequence: lastTodo.sequence, model: 'sys_util' },
    });
    expect(fork.status).toBe(202);
    const forked = await waitForTask(sut, fork.body.task_id);
    expect(forked.todos.map((t: { id: string; status: string }) => [t.id, t.status])).toEqual([
      ['parse', 'done'],
      ['tests', 'pending'],
    ]);
  });

  it('answered every request above as the OpenAPI document describes it', () => {
    expect(sut.responseMismatches).toEqual([]);
  });
});

describe('runledger run prints the todos', () => {
  it('each todo with its status after the stop reason', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rl-todos-cli-'));
    try {
      const script = join(dir, 'script.json');
      writeFileSync(
        script,
        JSON.stringify({
          orchestrator: [plan, update('parse', 'done'), update('tests', 'done'), respond('all done')],
        }),
      );
      const res = await runCli(['run', 'parse and test', '--model', `scripted:${script}`, '--yes'], {
        cwd: dir,
        env: { RUNLEDGER_DB: join(dir, 'data', 'runledger.db'), RUNLEDGER_MEMORY: 'off' },
      });
      expect(res.code).toBe(0);
      expect(res.stderr).toContain('stop reason: completed');
      expect(res.stderr).toContain('☑ parse [done] parse the input');
      expect(res.stderr).toContain('☑ tests [done] add the tests');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
