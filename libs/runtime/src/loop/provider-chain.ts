import { Role } from '@runledger/contracts';
import { FailureError } from '../model/failure-error';
import { AttemptOutcome, guardEvent, runWithRetries } from '../discipline/retry-runner';
import { RetrySettings } from '../discipline/settings';
import { ModelGateway } from './model-gateway';
import { ModelBackend, ModelCallError, ModelRequest, ModelResponse } from '../model/model-backend';
import { SYS_UTIL } from '../model/sys-util';
import { TaskWriter } from '../log/task-writer';

export interface ChainCall {
  gateway: ModelGateway;
  writer: TaskWriter;
  /** the providers that serve `role`, primary first (labels unique) */
  chain: readonly ModelBackend[];
  role: Role;
  round: number | null;
  /** the plan step the call works for (a coder step) */
  step_id?: string;
  request: Omit<ModelRequest, 'role' | 'onChunk' | 'cursor'>;
  streamRespond?: boolean;
  retry: RetrySettings;
  rng?: () => number;
}

export type ChainOutcome =
  | { ok: true; res: ModelResponse; provider: ModelBackend; position: number }
  | (Extract<AttemptOutcome<ModelResponse>, { ok: false }> & { provider: ModelBackend });

/**
 * One model request down a provider chain, under the failure policy: each
 * provider gets its retries (GUARD_TRIGGERED retry, MODEL_CALLED with its
 * attempt), then the next one takes over (GUARD_TRIGGERED fallback naming
 * from / to by label). The outcome is the first answer, or the failure that
 * ended the walk: a stop (authentication_error, budget, cancel) or the end of
 * the chain (decision: fallback to sys_util; the caller decides what that
 * means for its role). A task that switched provider for a role starts that
 * role's later requests there (ProviderSwitchesFold.chainStart), also when resumed or replayed.
 */
export async function callThroughChain(c: ChainCall): Promise<ChainOutcome> {
  const labels = c.chain.map((b) => b.label);
  for (let i = c.writer.fold.providers.chainStart(labels, c.role); ; i++) {
    const provider = c.chain[i];
    // A delegated agent's model for the role is asked of the configured provider; fallbacks keep their own.
    const agentModel = i === 0 ? c.writer.progress.agent?.models[c.role] : undefined;
    const request = agentModel ? { ...c.request, model: agentModel } : c.request;
    const out = await runWithRetries(
      (attempt) =>
        c.gateway.call({
          writer: c.writer,
          backend: provider,
          role: c.role,
          round: c.round,
          step_id: c.step_id,
          request,
          streamRespond: c.streamRespond,
          attempt,
        }),
      {
        subject: 'model',
        retry: c.retry,
        fallbacks: [...labels.slice(i + 1), SYS_UTIL],
        rng: c.rng,
        signal: c.request.signal,
        isFailure: (err) => err instanceof ModelCallError || err instanceof FailureError,
        onDecision: async (d, failure, attempt) => {
          if (d.action === 'retry')
            await c.writer.append([
              guardEvent('retry', c.round, d.detail, {
                role: c.role,
                kind: failure.kind,
                delay_ms: d.delay_ms,
                next_attempt: d.next_attempt,
                provider: provider.label,
              }),
            ]);
          else if (d.action === 'fallback' && d.to !== SYS_UTIL)
            await c.writer.append([
              guardEvent('fallback', c.round, d.detail, {
                role: c.role,
                kind: failure.kind,
                from: provider.label,
                to: d.to,
                attempts: attempt,
              }),
            ]);
        },
      },
    );
    if (out.ok) return { ok: true, res: out.value, provider, position: i };
    if (out.decision.action === 'stop' || out.decision.to === SYS_UTIL || c.request.signal?.aborted)
      return { ...out, provider };
  }
}
