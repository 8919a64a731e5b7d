import { RuntimeEvent } from '@runledger/contracts';
import { startFakeOpenAiServer } from '@runledger/testing';
import { ReplayBackend } from '../replay/recorded-parts';
import { PrimedReply, runModelBackendConformance } from '../testing/model-backend-conformance';
import { OpenAiBackend } from './openai-backend';
import { ResponsesBackend } from './responses-backend';
import { LabelledBackend } from './providers';
import { ScriptItem, ScriptedBackend } from './scripted-backend';
import { SysUtilBackend } from './sys-util';

const USAGE = { prompt_tokens: 12, completion_tokens: 5 };

const scriptItem = (r: PrimedReply): ScriptItem =>
  'error' in r
    ? { error: r.error, message: `scripted ${r.error}` }
    : 'tool_calls' in r
      ? { content: '', tool_calls: r.tool_calls, usage: USAGE }
      : { content: r.content, ...(r.chunks ? { chunks: r.chunks } : {}), usage: USAGE };

/** A scripted backend speaks the tools protocol for a role whose script has tool calls: one empty-call item primes it. */
const script = (replies: PrimedReply[], toolCalls: boolean): ScriptItem[] => {
  const items = replies.map(scriptItem);
  return toolCalls
    ? items.map((i) =>
        typeof i === 'object' && 'content' in i ? { ...i, tool_calls: i.tool_calls ?? [] } : i,
      )
    : items;
};

for (const toolCalls of [false, true]) {
  const protocol = toolCalls ? 'tools' : 'json';

  for (const [name, Backend] of [
    ['openai chat completions', OpenAiBackend],
    ['openai responses', ResponsesBackend],
  ] as const)
    runModelBackendConformance(
      `${name} (${protocol} protocol) against a local OpenAI-compatible server`,
      async (replies) => {
        const server = await startFakeOpenAiServer();
        server.enqueue(
          ...replies.map((r) =>
            'error' in r
              ? {
                  status: { rate_limited: 429, provider_error: 500, authentication_error: 401 }[r.error],
                  message: r.error,
                }
              : 'tool_calls' in r
                ? { content: '', tool_calls: r.tool_calls, usage: USAGE }
                : { content: r.content, chunks: r.chunks, usage: USAGE },
          ),
        );
        return {
          sut: new Backend({
            baseURL: server.baseURL,
            apiKey: 'k',
            models: { orchestrator: 'test-model' },
            protocol,
          }),
          close: () => server.close(),
        };
      },
      { toolCalls },
    );

  runModelBackendConformance(
    `scripted (${protocol})`,
    async (replies) => ({ sut: new ScriptedBackend({ orchestrator: script(replies, toolCalls) }) }),
    { toolCalls },
  );

  runModelBackendConformance(
    `labelled scripted (${protocol})`,
    async (replies) => ({
      sut: new LabelledBackend(
        new ScriptedBackend({ orchestrator: script(replies, toolCalls) }),
        'primary@test',
      ),
    }),
    { toolCalls },
  );

  runModelBackendConformance(
    `replay of a recording (${protocol})`,
    async (replies) => {
      // the recording as the log holds it: MODEL_RESPONDED per call, its streamed chunks as OUTPUT_CHUNK
      const events = replies.flatMap((r, i) => {
        const call_id = `call_${i}`;
        const responded = {
          type: 'MODEL_RESPONDED',
          payload: {
            call_id,
            role: 'orchestrator',
            model: 'recorded-model',
            content: 'error' in r ? null : 'content' in r ? r.content : '',
            usage: { ...USAGE, total_tokens: 17, estimated: false },
            finish_reason: 'error' in r ? null : 'stop',
            error: 'error' in r ? { kind: r.error, message: `recorded ${r.error}` } : null,
            retry_after_ms: null,
            ...(toolCalls && !('error' in r) ? { tool_calls: 'tool_calls' in r ? r.tool_calls : [] } : {}),
          },
        };
        const chunks = 'content' in r ? (r.chunks ?? [r.content]) : [];
        return [
          ...chunks.map((delta) => ({ type: 'OUTPUT_CHUNK', payload: { call_id, delta } })),
          responded,
        ] as unknown as RuntimeEvent[];
      });
      return { sut: ReplayBackend.fromEvents(events) };
    },
    { toolCalls },
  );
}

// sys_util computes its directive from the task's input: it is primed by that input, speaks the JSON
// protocol only, streams nothing and never fails
runModelBackendConformance('sys_util, primed by its input', async () => ({ sut: new SysUtilBackend() }), {
  toolCalls: false,
  streams: false,
  fails: false,
  answersFrom: [
    { input: 'read a.txt', content: '{"type":"tool","tool":"file_read","args":{"path":"a.txt"}}' },
    { input: 'run echo hi', content: '{"type":"tool","tool":"shell_exec","args":{"command":"echo hi"}}' },
    {
      input: 'write b.txt: hello',
      content: '{"type":"tool","tool":"file_write","args":{"path":"b.txt","content":"hello"}}',
    },
    {
      input: 'remember the sky is blue',
      content: '{"type":"tool","tool":"memory_insert","args":{"text":"the sky is blue"}}',
    },
    { input: 'recall sky', content: '{"type":"tool","tool":"memory_search","args":{"query":"sky"}}' },
  ],
});
