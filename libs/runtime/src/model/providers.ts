import { Role, RuntimeEvent } from '@runledger/contracts';
import { ModelBackend, ModelRequest, ModelResponse } from './model-backend';
import { SYS_UTIL } from './sys-util';

/**
 * A fallback chain of model providers: the configured backend first, then the
 * fallback providers in order, then (in the router) sys_util. Events name a
 * provider by its label, never by anything secret.
 */

/** `<model>@<host>` (the host without credentials, path or query); the model alone without a base URL. */
export function providerLabel(model: string, baseURL?: string | null): string {
  if (!baseURL) return model;
  try {
    return `${model}@${new URL(baseURL).host}`;
  } catch {
    return model;
  }
}

/** A backend under another label: the replay answers for every provider of the recorded chain. */
export class LabelledBackend extends ModelBackend {
  readonly backend: string;

  constructor(
    private readonly inner: ModelBackend,
    private readonly providerName: string,
  ) {
    super();
    this.backend = inner.backend;
  }

  override get label(): string {
    return this.providerName;
  }

  override get answersInProcess(): boolean {
    return this.inner.answersInProcess;
  }

  modelFor(role: Role): string | null {
    return this.inner.modelFor(role);
  }

  /** as the recorded provider spoke: a replay asks in the protocol the recording was made in */
  override speaksToolCalls(role: Role): boolean {
    return this.inner.speaksToolCalls(role);
  }

  complete(request: ModelRequest): Promise<ModelResponse> {
    return this.inner.complete(request);
  }
}

/** A duplicate label would make the chain's events ambiguous (and its position in a task unreadable). */
export function duplicateLabel(chain: readonly ModelBackend[]): string | null {
  const seen = new Set<string>();
  for (const b of chain) {
    if (seen.has(b.label)) return b.label;
    seen.add(b.label);
  }
  return null;
}

/**
 * The task's switches between providers, kept event by event from its
 * GUARD_TRIGGERED fallback events: per role, every fallback provider it
 * switched to (each once) and the detail of the latest switch.
 */
export class ProviderSwitchesFold {
  private readonly targets = new Map<Role, string[]>();
  private readonly details = new Map<Role, string>();

  apply(e: RuntimeEvent): void {
    if (e.type !== 'GUARD_TRIGGERED' || e.payload.guard !== 'fallback') return;
    const { role, to } = e.payload.data;
    if (to === SYS_UTIL) return;
    if (typeof role === 'string') this.details.set(role as Role, e.payload.detail);
    if (typeof to !== 'string') return;
    const key = ((role as Role | undefined) ?? 'orchestrator') as Role;
    const seen = this.targets.get(key) ?? [];
    if (!seen.includes(to)) this.targets.set(key, [...seen, to]);
  }

  /**
   * Where in the chain a role's next request starts: after the task switched to
   * a fallback provider it stays there (a provider that failed its retries is
   * not asked again in the same task, so each round does not pay for them and
   * for the model-call budget again). Read from the log, so a resumed or
   * replayed task starts where the original did.
   */
  chainStart(labels: readonly string[], role: Role): number {
    return (this.targets.get(role) ?? []).reduce((at, to) => Math.max(at, labels.indexOf(to)), 0);
  }

  /** The detail of the latest switch between providers for `role`: why a fallback provider answers. */
  lastSwitch(role: Role): string | null {
    return this.details.get(role) ?? null;
  }

  static of(events: readonly RuntimeEvent[]): ProviderSwitchesFold {
    const fold = new ProviderSwitchesFold();
    for (const e of events) fold.apply(e);
    return fold;
  }
}

export const chainStart = (labels: readonly string[], events: readonly RuntimeEvent[], role: Role): number =>
  ProviderSwitchesFold.of(events).chainStart(labels, role);

/**
 * The provider chain a recorded task went through, as labels, primary first:
 * every provider its retry and fallback events name (for `role`, or for any
 * role: every role walks the same chain in the same order), in order of
 * appearance. Empty when the task never retried nor fell back (then the labels
 * never show).
 */
export function recordedProviderLabels(events: readonly RuntimeEvent[], role?: Role): string[] {
  const labels: string[] = [];
  const add = (v: unknown) => {
    if (typeof v === 'string' && v !== SYS_UTIL && !labels.includes(v)) labels.push(v);
  };
  for (const e of events) {
    if (e.type !== 'GUARD_TRIGGERED') continue;
    if (role !== undefined && (e.payload.data.role ?? 'orchestrator') !== role) continue;
    if (e.payload.guard === 'retry') add(e.payload.data.provider);
    if (e.payload.guard === 'fallback') {
      add(e.payload.data.from);
      add(e.payload.data.to);
    }
  }
  return labels;
}
