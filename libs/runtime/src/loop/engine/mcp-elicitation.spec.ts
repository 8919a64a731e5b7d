import { MCP_ELICITATION_RULE, ToolManifest, ValidationError } from '@runledger/contracts';
import {
  ArgsValidation,
  ElicitationAnswer,
  RegisteredTool,
  ToolInputRequired,
  ToolRegistry,
  secretFieldOf,
} from '@runledger/tools';
import { ScriptedBackend } from '../../model/scripted-backend';
import { replayDivergence } from '../../replay/replay-view';
import { AllowAllPolicy, RuleTablePolicy, manifestOf, startTestRuntime } from '../../testing';
import { useTempStore } from '../../testing/temp-store';

const FORM = {
  type: 'object',
  properties: { name: { type: 'string' }, level: { type: 'integer', default: 3 } },
  required: ['name'],
};
const SECRET_FORM = { type: 'object', properties: { api_key: { type: 'string' } }, required: ['api_key'] };

/**
 * One tool standing in for an MCP server's: it asks its question through the context, as
 * McpServerConnection does, and keeps the answers that reached it.
 */
class AskingRegistry extends ToolRegistry {
  private readonly manifest = manifestOf('mcp__srv__ask');

  constructor(
    private readonly schema: Record<string, unknown>,
    readonly reached: ElicitationAnswer[],
  ) {
    super();
  }

  list(): ToolManifest[] {
    return [this.manifest];
  }

  validateArgs(): ArgsValidation {
    return { ok: true };
  }

  get(name: string): RegisteredTool | undefined {
    if (name !== this.manifest.name) return undefined;
    return {
      manifest: this.manifest,
      run: async (_args, ctx) => {
        const answer = ctx.elicitationAnswer?.(1);
        if (!answer)
          throw new ToolInputRequired(
            1,
            { message: 'who are you?', requested_schema: this.schema },
            secretFieldOf(this.schema),
          );
        this.reached.push(answer);
        const said = answer.action === 'accept' ? JSON.stringify(answer.content) : 'declined';
        return { tool: name, ok: true, output: `got ${said}`, error: null, metadata: {} };
      },
    };
  }
}

const script = () => ({
  orchestrator: ['{"type":"tool","tool":"mcp__srv__ask","args":{}}', '{"type":"respond","content":"done"}'],
});

describe('an MCP server asking the user during a call (elicitation)', () => {
  const temp = useTempStore('rl-elicit-');
  const runtime = async (schema: Record<string, unknown>, reached: ElicitationAnswer[]) =>
    (
      await startTestRuntime({
        store: temp.store,
        tools: new AskingRegistry(schema, reached),
        permissions: new AllowAllPolicy(),
        model: new ScriptedBackend(script()),
      })
    ).runtime;

  it('a form waits as a permission request; its content, answered after a restart, is what the re-issued call gets', async () => {
    const reached: ElicitationAnswer[] = [];
    const first = await runtime(FORM, reached);
    const { task_id } = await first.submit({ input: 'ask' }, { source: 'api' });
    const waiting = await first.settled(task_id);
    expect(waiting.status).toBe('awaiting_permission');
    expect(waiting.pendingPermission).toMatchObject({
      call_id: 'call_1.elicit1',
      rule: MCP_ELICITATION_RULE,
      args: { message: 'who are you?', requested_schema: FORM },
    });
    await first.close();

    const second = await runtime(FORM, reached);
    expect(await second.resumeUnfinished()).toEqual([]);
    const request = waiting.pendingPermission!.request_id;
    await expect(second.resolvePermission(task_id, request, 'allow_always', { name: 'Ada' })).rejects.toThrow(
      ValidationError,
    );
    await expect(second.resolvePermission(task_id, request, 'allow_once', { level: 2 })).rejects.toThrow(
      /must have required property 'name'/,
    );
    await second.resolvePermission(task_id, request, 'allow_once', { name: 'Ada' });
    const done = await second.settled(task_id);
    expect(done.final).toMatchObject({ stop_reason: 'completed', result: 'done' });
    // the schema's default is filled in, logged, and handed over
    expect(reached).toEqual([{ action: 'accept', content: { name: 'Ada', level: 3 } }]);
    const events = await temp.store.readWholeStream(task_id);
    expect(events.find((e) => e.type === 'PERMISSION_RESOLVED')?.payload).toMatchObject({
      call_id: 'call_1.elicit1',
      content: { name: 'Ada', level: 3 },
    });
    // the attempt that stopped for the question is issued again, not left as outcome_unknown
    expect(events.filter((e) => e.type === 'TOOL_CALLED').map((e) => e.payload)).toEqual([
      expect.objectContaining({ call_id: 'call_1', attempt: 1 }),
      expect.objectContaining({ call_id: 'call_1', attempt: 2 }),
    ]);
    expect(events.find((e) => e.type === 'TOOL_COMPLETED')?.payload).toMatchObject({
      result: { output: 'got {"name":"Ada","level":3}' },
    });
    // a replay stops where the recording stopped, answers from its log, and matches it
    const replay = await second.replay(task_id);
    expect(replay.progress.final?.stop_reason).toBe('completed');
    expect(replayDivergence(events, replay.events)).toBeNull();
    expect(reached).toHaveLength(1);
    await second.close();
  });

  it('deny declines the form (and replays so)', async () => {
    const reached: ElicitationAnswer[] = [];
    const sut = await runtime(FORM, reached);
    const { task_id } = await sut.submit({ input: 'ask' }, { source: 'api' });
    const waiting = await sut.settled(task_id);
    await expect(
      sut.resolvePermission(task_id, waiting.pendingPermission!.request_id, 'deny', { name: 'x' }),
    ).rejects.toThrow(/takes no content/);
    await sut.resolvePermission(task_id, waiting.pendingPermission!.request_id, 'deny');
    expect((await sut.settled(task_id)).final?.stop_reason).toBe('completed');
    expect(reached).toEqual([{ action: 'decline' }]);
    const replay = await sut.replay(task_id);
    expect(replayDivergence(await temp.store.readWholeStream(task_id), replay.events)).toBeNull();
    await sut.close();
  });

  it('a secret field waits as a secret request; the value reaches the server and never the log; the task replays', async () => {
    const reached: ElicitationAnswer[] = [];
    const sut = await runtime(SECRET_FORM, reached);
    const { task_id } = await sut.submit({ input: 'ask' }, { source: 'api' });
    const waiting = await sut.settled(task_id);
    expect(waiting.status).toBe('awaiting_secret');
    expect(waiting.pendingSecret).toMatchObject({ call_id: 'call_1.elicit1', secret_name: 'api_key' });
    await sut.provideSecret(task_id, waiting.pendingSecret!.request_id, 'sk-elicited-123456');
    expect((await sut.settled(task_id)).final?.stop_reason).toBe('completed');
    expect(reached).toEqual([{ action: 'accept', content: { api_key: 'sk-elicited-123456' } }]);
    const recorded = await temp.store.readWholeStream(task_id);
    expect(JSON.stringify(recorded)).not.toContain('sk-elicited-123456');
    const replay = await sut.replay(task_id);
    expect(replayDivergence(recorded, replay.events)).toBeNull();
    await sut.close();
  });

  it('content on an ordinary permission request is refused', async () => {
    const { runtime: sut } = await startTestRuntime({
      store: temp.store,
      tools: new AskingRegistry(FORM, []),
      permissions: new RuleTablePolicy({ mcp__srv__ask: 'prompt' }),
      model: new ScriptedBackend(script()),
    });
    const { task_id } = await sut.submit({ input: 'ask' }, { source: 'api' });
    const waiting = await sut.settled(task_id);
    expect(waiting.pendingPermission).toMatchObject({
      call_id: 'call_1',
      rule: expect.not.stringMatching(MCP_ELICITATION_RULE),
    });
    await expect(
      sut.resolvePermission(task_id, waiting.pendingPermission!.request_id, 'allow_once', { name: 'x' }),
    ).rejects.toThrow(/content answers an MCP server's form only/);
    await sut.close();
  });
});
