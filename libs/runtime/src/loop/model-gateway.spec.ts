import { InMemoryEventStore } from '@runledger/event-store';
import { FailureError } from '../model/failure-error';
import { taskReceivedPayload } from '../discipline/testing-events';
import { ModelGateway } from './model-gateway';
import { ChatMessage, zeroUsage } from '../model/model-backend';
import { ScriptedBackend } from '../model/scripted-backend';
import { TaskWriter } from '../log/task-writer';

async function newWriter(): Promise<TaskWriter> {
  const store = new InMemoryEventStore();
  const received = taskReceivedPayload('x', { session_id: 'sess_1' });
  await store.append('task_1', [{ type: 'TASK_RECEIVED', payload: received }], { expected: 'no_stream' });
  return TaskWriter.open(store, 'task_1');
}

const asks: ChatMessage = {
  role: 'assistant',
  content: '',
  tool_calls: [
    { id: 'c1', name: 'file_read', arguments: '{"path":"a"}' },
    { id: 'c2', name: 'file_read', arguments: '{"path":"b"}' },
  ],
};
const answer = (id: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content: 'r' });

describe('ModelGateway and tool turns', () => {
  it('a malformed tool-turn sequence is never sent: validation_error, nothing asked, nothing recorded as called', async () => {
    const sut = new ModelGateway();
    const writer = await newWriter();
    const backend = new ScriptedBackend({ orchestrator: ['never asked'] });
    const complete = jest.spyOn(backend, 'complete');
    const call = sut.call({
      writer,
      backend,
      role: 'orchestrator',
      round: 1,
      request: {
        messages: [{ role: 'user', content: 'u' }, asks, answer('c2'), answer('c1')],
        timeout_ms: 1000,
      },
    });
    await expect(call).rejects.toThrow(FailureError);
    await expect(call).rejects.toMatchObject({
      kind: 'validation_error',
      message: /answers c2, expected c1/,
    });
    expect(complete).not.toHaveBeenCalled();
    expect(writer.log.map((e) => e.type)).toEqual(['TASK_RECEIVED']);
  });

  it('a well-formed one is sent, MODEL_CALLED counts its turns and MODEL_RESPONDED records the reply calls exactly', async () => {
    const sut = new ModelGateway();
    const writer = await newWriter();
    const calls = [{ id: 'c3', name: 'file_read', arguments: '{"path": "c"}' }];
    const backend = new ScriptedBackend({ orchestrator: [{ content: '', tool_calls: calls }] });
    await sut.call({
      writer,
      backend,
      role: 'orchestrator',
      round: 1,
      request: {
        messages: [{ role: 'user', content: 'u' }, asks, answer('c1'), answer('c2')],
        timeout_ms: 1000,
      },
    });
    const [called, responded] = writer.log.slice(1);
    expect(called).toMatchObject({
      type: 'MODEL_CALLED',
      payload: { tool_turns: { count: 1, malformed: 0 } },
    });
    expect(responded).toMatchObject({ type: 'MODEL_RESPONDED', payload: { tool_calls: calls } });
  });
});

describe('ModelGateway: when MODEL_CALLED is durable', () => {
  const ask = (sut: ModelGateway, writer: TaskWriter, backend: ScriptedBackend) =>
    sut.call({
      writer,
      backend,
      role: 'orchestrator',
      round: 1,
      request: { messages: [{ role: 'user', content: 'u' }], timeout_ms: 1000 },
    });

  it('a provider is asked only once the call is in the log', async () => {
    const writer = await newWriter();
    const backend = new ScriptedBackend({ orchestrator: ['an answer'] });
    let committedWhenAsked = -1;
    jest.spyOn(backend, 'complete').mockImplementation(async () => {
      committedWhenAsked = writer.committedThrough;
      return { content: 'an answer', usage: zeroUsage(), model: 'scripted', finish_reason: 'stop' };
    });
    await ask(new ModelGateway(), writer, backend);
    expect(committedWhenAsked).toBe(2);
    // the reply rides with the task's next append
    expect(writer.committedThrough).toBe(2);
    expect(writer.log.map((e) => e.type)).toEqual(['TASK_RECEIVED', 'MODEL_CALLED', 'MODEL_RESPONDED']);
  });

  it('a model answering in process sends nothing: its call rides with the reply in the next append', async () => {
    const writer = await newWriter();
    const backend = new ScriptedBackend({ orchestrator: ['an answer'] }, { answersInProcess: true });
    const res = await ask(new ModelGateway(), writer, backend);
    expect(res.content).toBe('an answer');
    expect(writer.committedThrough).toBe(1);
    expect(writer.log.map((e) => e.type)).toEqual(['TASK_RECEIVED', 'MODEL_CALLED', 'MODEL_RESPONDED']);
    await writer.flush();
    expect(writer.committedThrough).toBe(3);
  });
});
