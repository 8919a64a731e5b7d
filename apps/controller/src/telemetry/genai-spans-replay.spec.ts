import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InMemoryEventStore } from '@runledger/event-store';
import { replayTask, ScriptedBackend } from '@runledger/runtime';
import {
  RecordingRuntimeLogger,
  RuleTablePolicy,
  startTestRuntime,
  testToolRegistry,
} from '@runledger/testing';
import { GEN_AI, RUNLEDGER_ATTR, SpanDescription, taskSpans } from './genai-spans';

/** a span without what names its task or places it in time: what a replay must reproduce */
const shape = (s: SpanDescription) => {
  const {
    [RUNLEDGER_ATTR.TASK_ID]: _task,
    [RUNLEDGER_ATTR.SESSION_ID]: _session,
    [GEN_AI.CONVERSATION_ID]: _conv,
    ...attributes
  } = s.attributes;
  return {
    name: s.name,
    operation: s.operation,
    kind: s.kind,
    status: s.status,
    attributes,
    root: s.parent_id === null,
  };
};

describe('taskSpans of a replay', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'rl-otel-replay-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('a replayed task maps to the spans of its recording, its model calls named for the replay backend that served them', async () => {
    const store = new InMemoryEventStore();
    writeFileSync(join(dir, 'in.txt'), 'recorded');
    const model = new ScriptedBackend({
      orchestrator: [
        {
          content: JSON.stringify({ type: 'tool', tool: 'file_read', args: { path: 'in.txt' } }),
          usage: { prompt_tokens: 9, completion_tokens: 4 },
        },
        {
          content: JSON.stringify({ type: 'respond', content: 'read it' }),
          usage: { prompt_tokens: 12, completion_tokens: 3 },
        },
      ],
    });
    const rt = await startTestRuntime({
      store,
      tools: testToolRegistry(dir),
      permissions: new RuleTablePolicy({}),
      model,
    });
    const { task_id } = await rt.runtime.submit({ input: 'read in.txt' }, { source: 'cli' });
    await rt.runtime.settled(task_id);
    await rt.close();
    const replay = await replayTask(
      { store, tools: testToolRegistry(dir), logger: new RecordingRuntimeLogger() },
      task_id,
    );

    const recorded = taskSpans(await store.readWholeStream(task_id), { captureContent: true });
    const replayed = taskSpans(await store.readWholeStream(replay.task_id), { captureContent: true });
    expect(recorded.map((s) => s.operation)).toEqual(['invoke_agent', 'chat', 'execute_tool', 'chat']);
    // nothing called a provider in a replay: its chat spans say so, or a backend pricing by model would count the spend twice
    const servedByReplay = (s: SpanDescription) =>
      s.operation !== 'chat'
        ? s
        : {
            ...s,
            name: 'chat replay',
            attributes: {
              ...s.attributes,
              [GEN_AI.PROVIDER_NAME]: 'replay',
              [GEN_AI.SYSTEM]: 'replay',
              [GEN_AI.REQUEST_MODEL]: 'replay',
            },
          };
    expect(replayed.map(shape)).toEqual(recorded.map(servedByReplay).map(shape));
  });
});
