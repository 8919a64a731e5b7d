import { dirname, join, resolve, basename } from 'node:path';
import { Kysely } from 'kysely';
import { ConfigError } from '@runledger/contracts';
import { Critic, CriticModel, HeuristicCritic, ModelCritic } from '@runledger/critic';
import { EventStore } from '@runledger/event-store';
import {
  DEFAULT_MEMORY_POLICY,
  Embedder,
  HashingEmbedder,
  MemoryDatabase,
  MemoryPolicyConfig,
  MemoryService,
  MemoryStore,
  OpenAIEmbedder,
  createCriticMemoryHook,
  createMemoryEndGuard,
} from '@runledger/memory';
import { LoopGuard, MemoryRecall, ModelBackend, ToolOutcomeHook } from '@runledger/runtime';
import { MemoryToolService } from '@runledger/tools';
import { AppConfig } from '../config';

export interface BuiltMemory {
  /** null when RUNLEDGER_MEMORY=off (the critic may still score) */
  service: MemoryService | null;
  critic: Critic | null;
  /** the runtime's ToolOutcomeHook: critic, then the write policy */
  hook: ToolOutcomeHook | null;
  /** writes a completed task's summary and plans; register after guards that may still change the stop */
  endGuard: LoopGuard | null;
  recall: MemoryRecall | null;
  tools: MemoryToolService | null;
  close(): Promise<void>;
}

/** The critic role of the configured model as the critic lib sees it; null when nothing serves the role. */
export function criticFromConfig(config: AppConfig, model: ModelBackend): Critic | null {
  if (config.RUNLEDGER_CRITIC === 'off') return null;
  const name = model.modelFor('critic');
  if (config.RUNLEDGER_CRITIC === 'heuristic' || !name) {
    if (config.RUNLEDGER_CRITIC === 'model')
      throw new ConfigError(
        'RUNLEDGER_CRITIC=model but no model serves the critic role (set RUNLEDGER_MODEL_CRITIC)',
      );
    return new HeuristicCritic();
  }
  const criticModel: CriticModel = {
    model: name,
    backend: model.backend,
    async complete(messages, { timeout_ms, signal }) {
      const res = await model.complete({ role: 'critic', messages, timeout_ms, signal });
      return { content: res.content, usage: res.usage };
    },
  };
  return new ModelCritic(criticModel, config.RUNLEDGER_CRITIC_TIMEOUT_MS);
}

export function embedderFromConfig(config: AppConfig): Embedder {
  if (config.RUNLEDGER_EMBEDDER === 'hash') return new HashingEmbedder(config.RUNLEDGER_EMBEDDING_DIM);
  if (!config.OPENAI_BASE_URL || !config.RUNLEDGER_EMBEDDING_MODEL) {
    throw new ConfigError('RUNLEDGER_EMBEDDER=openai needs OPENAI_BASE_URL and RUNLEDGER_EMBEDDING_MODEL');
  }
  return new OpenAIEmbedder({
    baseURL: config.OPENAI_BASE_URL,
    apiKey: config.OPENAI_API_KEY,
    model: config.RUNLEDGER_EMBEDDING_MODEL,
    dim: config.RUNLEDGER_EMBEDDING_DIM,
  });
}

export function policyFromConfig(config: AppConfig): MemoryPolicyConfig {
  return {
    ...DEFAULT_MEMORY_POLICY,
    ...(config.RUNLEDGER_MEMORY_MIN_WEIGHT !== undefined
      ? { min_weight: config.RUNLEDGER_MEMORY_MIN_WEIGHT }
      : {}),
    ...(config.RUNLEDGER_MEMORY_DEDUP_THRESHOLD !== undefined
      ? { dedup_threshold: config.RUNLEDGER_MEMORY_DEDUP_THRESHOLD }
      : {}),
  };
}

const indexPathFor = (config: AppConfig): string => {
  if (config.RUNLEDGER_MEMORY_INDEX) return resolve(config.RUNLEDGER_MEMORY_INDEX);
  const db = resolve(config.RUNLEDGER_DB);
  return join(dirname(db), `${basename(db)}.memory.hnsw`);
};

/** Memory and critic wired for the runtime: recall for the ContextBuilder, the outcome hook, the memory tools. */
export async function buildMemory(
  config: AppConfig,
  deps: { db: Kysely<unknown>; store: EventStore; model: ModelBackend },
): Promise<BuiltMemory> {
  const critic = criticFromConfig(config, deps.model);
  const service =
    config.RUNLEDGER_MEMORY === 'on'
      ? await MemoryService.open({
          store: new MemoryStore(deps.db as Kysely<MemoryDatabase>),
          events: deps.store,
          embedder: embedderFromConfig(config),
          indexPath: indexPathFor(config),
        })
      : null;
  const policy = policyFromConfig(config);
  const hook = critic ? createCriticMemoryHook({ critic, memory: service, policy }) : null;
  return {
    service,
    critic,
    hook,
    endGuard: service ? createMemoryEndGuard(service, policy) : null,
    recall: service ? recallOver(service) : null,
    tools: service ? toolsOver(service, policy) : null,
    close: async () => service?.close(),
  };
}

/** Memory across sessions: what one task stored helps the next, whoever asks. */
export const recallOver = (service: MemoryService): MemoryRecall => ({
  async recall(query, { k }) {
    const hits = await service.search(query, { k });
    return hits.map((h) => ({ id: h.entry.id, text: h.entry.text, score: h.score }));
  },
});

export const toolsOver = (service: MemoryService, policy: MemoryPolicyConfig): MemoryToolService => ({
  async search({ query, limit, kind }) {
    const hits = await service.search(query, { k: limit, kind });
    return hits.map((h) => ({
      id: h.entry.id,
      text: h.entry.text,
      kind: h.entry.kind,
      weight: h.entry.weight,
      score: h.score,
      metadata: h.entry.metadata,
    }));
  },
  async insert({ text, kind, weight, metadata }, ctx) {
    const { entry } = await service.remember(
      {
        text,
        kind,
        source: 'tool',
        weight: weight ?? 0.5,
        reason: 'memory_insert tool',
        task_id: ctx.task_id,
        session_id: ctx.session_id,
        metadata: { ...metadata, call_id: ctx.call_id },
      },
      policy,
    );
    return { id: entry.id };
  },
  async list({ limit, kind }) {
    const entries = await service.list({ kind }, limit);
    return entries.map((e) => ({
      id: e.id,
      text: e.text,
      kind: e.kind,
      weight: e.weight,
      metadata: e.metadata,
    }));
  },
});
