import { Role } from '@runledger/contracts';
import { ModelBackend, ModelRequest, ModelResponse } from '../model/model-backend';

/**
 * A model that answers by the task it works for (its `## Task` section): `reply(task, prompt)` is
 * the reply's text, so a parent and the children it delegates to can be scripted apart. Every
 * request is kept, so a test can read what each task was shown.
 */
export class TaskRoutedBackend extends ModelBackend {
  readonly backend = 'routed';
  readonly requests: ModelRequest[] = [];

  constructor(
    private readonly reply: (task: string, prompt: string, signal?: AbortSignal) => Promise<string> | string,
  ) {
    super();
  }

  modelFor(role: Role): string | null {
    return role === 'orchestrator' ? 'routed-model' : null;
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const prompt = request.messages.map((m) => m.content).join('\n');
    const task = /## Task\n([\s\S]*)$/.exec(prompt)?.[1].trim() ?? '';
    const content = await this.reply(task, prompt, request.signal);
    return {
      content,
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, estimated: false },
      model: 'routed-model',
      finish_reason: 'stop',
    };
  }
}
