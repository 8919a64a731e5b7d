import {
  ConcurrencyError,
  ConfigError,
  EventPayload,
  NotFoundError,
  UnauthorizedError,
  ValidationError,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { RuntimeController } from '@runledger/runtime';
import type { InboundHookConfig } from './hook-config';
import { HookAction, HookDelivery, mapDelivery } from './hook-mapping';
import { deliveryIdOf, sha256Hex, signatureHeaderOf, signatureProblem } from './hook-signature';

/** A configured hook with the secret its variable held at boot (the variable is then dropped). */
export interface ConfiguredHook {
  config: InboundHookConfig;
  secret: string;
}

/** What a delivery came to, as recorded; `duplicate`: its id was recorded before, nothing new was done. */
export type HookReceipt = EventPayload<'HOOK_RECEIVED'> & { duplicate: boolean };

/** A hook as GET /hooks shows it: its configuration, never its secret. */
export interface HookView {
  name: string;
  signature: InboundHookConfig['signature'];
  signature_header: string;
  secret_env: string;
  tolerance_s: number;
  delivery_header: string | null;
  when: InboundHookConfig['when'] | null;
  task: InboundHookConfig['task'] | null;
  signal: InboundHookConfig['signal'] | null;
}

/** The secret of each hook, read from its variable once at boot: a hook without one stops the boot. */
export function configuredHooks(
  hooks: readonly InboundHookConfig[],
  env: NodeJS.ProcessEnv,
): ConfiguredHook[] {
  return hooks.map((config) => {
    const secret = env[config.secret_env];
    if (!secret)
      throw new ConfigError(
        `RUNLEDGER_HOOKS: hook ${config.name}: environment variable ${config.secret_env} is not set`,
      );
    return { config, secret };
  });
}

/** Every delivery receipt's stream starts so (retention archives them by age: docs/retention.md). */
export const HOOK_RECEIPT_STREAM_PREFIX = 'hook:';

/** The stream of one delivery's receipt: written once (expected no_stream), so concurrent copies record one. */
export const receiptStreamOf = (hook: string, deliveryId: string): string =>
  `${HOOK_RECEIPT_STREAM_PREFIX}${hook}:${sha256Hex(deliveryId).slice(0, 32)}`;

/** The idempotency key of the task a delivery starts, and the id of the signal it sends. */
export const hookTaskKey = (hook: string, deliveryId: string): string => `hook:${hook}:${deliveryId}`;
export const hookSignalId = (hook: string, deliveryId: string): string =>
  `sig_hook_${sha256Hex(`${hook}:${deliveryId}`).slice(0, 32)}`;

/** A JSON body (also GitHub's form-encoded `payload=`); any other text is the body as a string. */
function parseBody(raw: Buffer, contentType: string | undefined): unknown {
  const text = raw.toString('utf8');
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'application/x-www-form-urlencoded') {
    const form = new URLSearchParams(text);
    const payload = form.get('payload');
    if (payload === null) return Object.fromEntries(form);
    return parseJson(payload, 'the form field payload');
  }
  if (text.trim() === '') return null;
  if (type === '' || type === 'application/json' || type.endsWith('+json'))
    return parseJson(text, 'the body');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // JSON.parse quotes the text in its message: never echo a body
    throw new ValidationError(`${what} is not valid JSON`, { field: 'body' });
  }
}

/**
 * Inbound webhooks (`POST /hooks/:name`): a delivery is verified with its hook's secret, mapped by the
 * hook's configuration to a task or a signal, and recorded (HOOK_RECEIVED) in a stream of its own.
 * The task is submitted under an idempotency key and the signal sent under an id both made of the
 * hook and the delivery id, before the receipt is written: a delivery sent again (a provider's retry,
 * a copy to another instance, a crash between the two writes) starts one task or sends one signal,
 * and its receipt, once written, answers every later copy. Nothing is kept in memory but the
 * configuration.
 */
export class InboundHooks {
  private readonly hooks: ReadonlyMap<string, ConfiguredHook>;

  constructor(
    hooks: readonly ConfiguredHook[],
    private readonly store: EventStore,
    private readonly runtime: RuntimeController,
  ) {
    this.hooks = new Map(hooks.map((h) => [h.config.name, h]));
  }

  list(): HookView[] {
    return [...this.hooks.values()].map(({ config: c }) => ({
      name: c.name,
      signature: c.signature,
      signature_header: signatureHeaderOf(c.signature),
      secret_env: c.secret_env,
      tolerance_s: c.tolerance_s,
      delivery_header: c.delivery_header ?? null,
      when: c.when ?? null,
      task: c.task ?? null,
      signal: c.signal ?? null,
    }));
  }

  async receive(
    name: string,
    raw: Buffer,
    headers: Readonly<Record<string, string>>,
    nowMs = Date.now(),
  ): Promise<HookReceipt> {
    const hook = this.hooks.get(name);
    if (!hook) throw new NotFoundError(`no hook named ${name}`, { hook: name });
    const { config } = hook;
    const problem = signatureProblem(config.signature, hook.secret, raw, headers, nowMs, config.tolerance_s);
    if (problem) throw new UnauthorizedError(`hook ${name}: ${problem}`, { hook: name });
    const body = parseBody(raw, headers['content-type']);
    const delivery: HookDelivery = {
      hook: name,
      delivery_id: deliveryIdOf(config, headers, body, raw),
      body,
      headers,
    };
    const stream = receiptStreamOf(name, delivery.delivery_id);
    const recorded = await this.recordedReceipt(stream);
    if (recorded) return recorded;
    const receipt = await this.act(config, delivery, mapDelivery(config, delivery), sha256Hex(raw));
    try {
      await this.store.append(stream, [{ type: 'HOOK_RECEIVED', session_id: stream, payload: receipt }], {
        expected: 'no_stream',
      });
    } catch (err) {
      // a copy of the delivery recorded first (here or on another instance): its receipt stands
      if (!(err instanceof ConcurrencyError)) throw err;
      const first = await this.recordedReceipt(stream);
      if (first) return first;
      throw err;
    }
    return { ...receipt, duplicate: false };
  }

  private async recordedReceipt(stream: string): Promise<HookReceipt | null> {
    const [first] = await this.store.readStream(stream, { limit: 1 });
    return first?.type === 'HOOK_RECEIVED' ? { ...first.payload, duplicate: true } : null;
  }

  /** The task submitted or the signal sent (each idempotent under the delivery's id), as the receipt records it. */
  private async act(
    hook: InboundHookConfig,
    d: HookDelivery,
    action: HookAction,
    body_sha256: string,
  ): Promise<EventPayload<'HOOK_RECEIVED'>> {
    const receipt = { hook: hook.name, delivery_id: d.delivery_id, body_sha256 };
    switch (action.action) {
      case 'ignored':
        return { ...receipt, action: 'ignored', task_id: null, signal_id: null, signal_name: null };
      case 'task': {
        const { task_id } = await this.runtime.submit(action.task, {
          idempotency_key: hookTaskKey(hook.name, d.delivery_id),
          source: 'hook',
        });
        return { ...receipt, action: 'task', task_id, signal_id: null, signal_name: null };
      }
      case 'signal': {
        const sent = await this.runtime.sendSignal(action.task_id, {
          name: action.name,
          payload: action.payload,
          signal_id: hookSignalId(hook.name, d.delivery_id),
        });
        return {
          ...receipt,
          action: 'signal',
          task_id: sent.task_id,
          signal_id: sent.signal_id,
          signal_name: sent.name,
        };
      }
    }
  }
}
