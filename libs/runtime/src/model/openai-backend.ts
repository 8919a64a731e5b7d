import type OpenAI from 'openai';
import { ModelToolCall, Role, TokenUsage } from '@runledger/contracts';
import { ChatMessage, ModelRequest, ModelResponse, estimatedUsage } from './model-backend';
import { ToolCallAssembler } from './tool-turns';
import { OpenAiCompatibleBackend } from './openai-compatible';

const usageOf = (u: OpenAI.CompletionUsage | null | undefined): TokenUsage | null =>
  u
    ? {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.total_tokens,
        estimated: false,
      }
    : null;

/** Our messages in the wire shape: tool calls as function calls, tool results answering their call id. */
function toWire(messages: readonly ChatMessage[]): OpenAI.ChatCompletionMessageParam[] {
  return messages.map((m): OpenAI.ChatCompletionMessageParam => {
    if (m.role === 'tool') return { role: 'tool', tool_call_id: m.tool_call_id, content: m.content };
    if (m.role === 'assistant' && m.tool_calls)
      return {
        role: 'assistant',
        content: m.content || null,
        tool_calls: m.tool_calls.map((c) => ({
          id: c.id,
          type: 'function',
          function: { name: c.name, arguments: c.arguments },
        })),
      };
    return { role: m.role, content: m.content };
  });
}

/** A whole reply's function calls; one the server sent without an id is given one from its index, as a streamed one is. */
const functionCalls = (calls: readonly OpenAI.ChatCompletionMessageToolCall[] | undefined): ModelToolCall[] =>
  (calls ?? []).flatMap((c, index) =>
    c.type === 'function'
      ? [{ id: c.id || `call_${index}`, name: c.function.name, arguments: c.function.arguments }]
      : [],
  );

/** Any OpenAI-compatible chat completions server: OpenAI, Ollama, vLLM, llama.cpp server. */
export class OpenAiBackend extends OpenAiCompatibleBackend {
  readonly backend = 'openai';

  protected withModels(models: Partial<Record<Role, string>>): OpenAiBackend {
    return new OpenAiBackend({ ...this.options, models });
  }

  /** json protocol: the directive schema as response_format (see withStructuredOutput) */
  protected async send(
    model: string,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse> {
    const call = (b: OpenAI.ChatCompletionCreateParamsNonStreaming) =>
      this.streams(request) ? this.streamed(b, request, signal, touch) : this.whole(b, request, signal);
    return this.withStructuredOutput(this.body(model, request), 'response_format', call);
  }

  private body(model: string, request: ModelRequest): OpenAI.ChatCompletionCreateParamsNonStreaming {
    const body: OpenAI.ChatCompletionCreateParamsNonStreaming = { model, messages: toWire(request.messages) };
    if (this.offersTools(request)) {
      body.tools = request.tools!.map((f) => ({
        type: 'function',
        function: { name: f.name, description: f.description, parameters: f.parameters },
      }));
      Object.assign(body, this.toolChoiceOf(request));
    }
    if (this.protocol === 'json' && request.response_schema && !this.structuredOutputRefused)
      body.response_format = {
        type: 'json_schema',
        json_schema: { name: request.response_schema.name, schema: request.response_schema.schema },
      };
    return body;
  }

  private async whole(
    body: OpenAI.ChatCompletionCreateParamsNonStreaming,
    request: ModelRequest,
    signal: AbortSignal,
  ): Promise<ModelResponse> {
    const res = await this.client.chat.completions.create(body, { signal });
    const message = res.choices[0]?.message;
    const content = message?.content ?? '';
    const reasoning = reasoningOf(message);
    return {
      content,
      ...(reasoning ? { reasoning } : {}),
      usage: usageOf(res.usage) ?? estimatedUsage(request.messages, content),
      model: res.model || body.model,
      finish_reason: res.choices[0]?.finish_reason ?? null,
      ...this.callsOf(request, functionCalls(message?.tool_calls)),
    };
  }

  private async streamed(
    body: OpenAI.ChatCompletionCreateParamsNonStreaming,
    request: ModelRequest,
    signal: AbortSignal,
    touch: () => void,
  ): Promise<ModelResponse> {
    const stream = await this.client.chat.completions.create(
      { ...body, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    const calls = new ToolCallAssembler();
    let content = '';
    let reasoning = '';
    let usage: TokenUsage | null = null;
    let finish: string | null = null;
    let served = body.model;
    for await (const chunk of stream) {
      touch();
      served = chunk.model || served;
      usage = usageOf(chunk.usage) ?? usage;
      const choice = chunk.choices[0];
      if (choice?.finish_reason) finish = choice.finish_reason;
      calls.feed(choice?.delta?.tool_calls);
      const thought = reasoningOf(choice?.delta);
      if (thought) {
        reasoning += thought;
        request.onReasoningChunk?.(thought);
      }
      const delta = choice?.delta?.content;
      if (delta) {
        content += delta;
        request.onChunk?.(delta);
      }
    }
    return {
      content,
      ...(reasoning ? { reasoning } : {}),
      usage: usage ?? estimatedUsage(request.messages, content),
      model: served,
      finish_reason: finish,
      ...this.callsOf(request, calls.result()),
    };
  }
}

/**
 * The reasoning an OpenAI-compatible server returns beside the content, as those that do name it:
 * `reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning` (OpenRouter, Ollama).
 */
function reasoningOf(part: unknown): string | undefined {
  if (!part || typeof part !== 'object') return undefined;
  const { reasoning_content, reasoning } = part as { reasoning_content?: unknown; reasoning?: unknown };
  const text = typeof reasoning_content === 'string' ? reasoning_content : reasoning;
  return typeof text === 'string' && text !== '' ? text : undefined;
}
