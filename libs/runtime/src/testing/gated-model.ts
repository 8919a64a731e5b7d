import { ModelRequest, ModelResponse } from '../model/model-backend';
import { ScriptedBackend } from '../model/scripted-backend';

/**
 * Answers every orchestrator call with one respond directive once the test opens the gate, so
 * tasks stay running as long as a test needs; an aborted call (cancel, shutdown) stops waiting.
 */
export class GatedBackend extends ScriptedBackend {
  private open!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.open = resolve));

  constructor(answer = 'done') {
    super({ orchestrator: [JSON.stringify({ type: 'respond', content: answer })] });
  }

  release(): void {
    this.open();
  }

  override async complete(request: ModelRequest): Promise<ModelResponse> {
    await new Promise<void>((resolve, reject) => {
      const signal = request.signal;
      if (signal?.aborted) return reject(signal.reason);
      void this.gate.then(resolve);
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
    return super.complete(request);
  }
}
