import { dirname, join, resolve, basename } from 'node:path';
import { Logger } from 'pino';
import { ConfigError } from '@runledger/contracts';
import { CriticOptions } from '@runledger/critic';
import {
  DEFAULT_MEMORY_POLICY,
  EmbedderOptions,
  MemoryFilter,
  MemoryOptions,
  MemoryPolicyConfig,
  MemoryService,
} from '@runledger/memory';
import { MemoryRecall, ModelBackend, criticModelOf } from '@runledger/runtime';
import { MemoryToolService } from '@runledger/tools';
import { AppConfig } from '../config';
import { isPostgresUrl } from '@runledger/event-store';

/** RUNLEDGER_CRITIC and the critic role of the configured model -> CriticModule's options (auto: the model when one serves the role). */
export function criticOptionsFromConfig(config: AppConfig, model: ModelBackend): CriticOptions {
  if (config.RUNLEDGER_CRITIC === 'off') return { mode: 'off' };
  const name = model.modelFor('critic');
  if (config.RUNLEDGER_CRITIC === 'heuristic' || !name) {
    if (config.RUNLEDGER_CRITIC === 'model')
      throw new ConfigError(
        'RUNLEDGER_CRITIC=model but no model serves the critic role (set RUNLEDGER_MODEL_CRITIC)',
      );
    return { mode: 'heuristic' };
  }
  const criticModel = criticModelOf(model)!;
  return { mode: 'model', model: criticModel, timeoutMs: config.RUNLEDGER_CRITIC_TIMEOUT_MS };
}

export function embedderOptionsFromConfig(config: AppConfig): EmbedderOptions {
  if (config.RUNLEDGER_EMBEDDER === 'hash') return { kind: 'hash', dim: config.RUNLEDGER_EMBEDDING_DIM };
  if (!config.OPENAI_BASE_URL || !config.RUNLEDGER_EMBEDDING_MODEL) {
    throw new ConfigError('RUNLEDGER_EMBEDDER=openai needs OPENAI_BASE_URL and RUNLEDGER_EMBEDDING_MODEL');
  }
  return {
    kind: 'openai',
    baseURL: config.OPENAI_BASE_URL,
    apiKey: config.OPENAI_API_KEY,
    model: config.RUNLEDGER_EMBEDDING_MODEL,
    dim: config.RUNLEDGER_EMBEDDING_DIM,
  };
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

/**
 * The HNSW file beside a SQLite file. With PostgreSQL each instance keeps its
 * index in memory (built from the table at boot, then kept in step from the
 * log), unless RUNLEDGER_MEMORY_INDEX names a file of its own.
 */
const indexPathFor = (config: AppConfig): string | null => {
  if (config.RUNLEDGER_MEMORY_INDEX) return resolve(config.RUNLEDGER_MEMORY_INDEX);
  if (isPostgresUrl(config.RUNLEDGER_DB)) return null;
  const db = resolve(config.RUNLEDGER_DB);
  return join(dirname(db), `${basename(db)}.memory.hnsw`);
};

/** RUNLEDGER_MEMORY* -> MemoryModule's options. */
export const memoryOptionsFromConfig = (config: AppConfig, log?: Logger): MemoryOptions =>
  config.RUNLEDGER_MEMORY === 'on'
    ? {
        enabled: true,
        embedder: embedderOptionsFromConfig(config),
        indexPath: indexPathFor(config),
        // a missing or stale index is rebuilt off the event loop; /health says so meanwhile
        rebuildIndexInBackground: true,
        policy: policyFromConfig(config),
        // a write reinforces only what the writer's task may reach (see MemoryReach)
        deduplicateWithinSession: memoryReachOf(config) === 'own-session',
        log: log && ((message, err) => log.error({ err }, message)),
      }
    : { enabled: false, policy: policyFromConfig(config) };

/**
 * How far a task's recall and memory tools reach. `all`: every session's entries (memory shared
 * across sessions). `own-session`: the task's own session's entries and those written for nobody,
 * so no session's content is copied into another session's events (CONTEXT_BUILT, TOOL_COMPLETED),
 * sealed under that session's keys where erasing the first session would not reach it.
 */
export type MemoryReach = 'all' | 'own-session';

/** With erasure on, a task reaches its own session's memory only (see MemoryReach). */
export const memoryReachOf = (config: AppConfig): MemoryReach =>
  config.RUNLEDGER_ERASURE === 'on' ? 'own-session' : 'all';

const reachable = (reach: MemoryReach, sessionId: string): MemoryFilter =>
  reach === 'own-session' ? { sessions: [sessionId, null] } : {};

/** Memory across sessions (or, reach `own-session`, within the task's): what one task stored helps the next. */
export const recallOver = (service: MemoryService, reach: MemoryReach = 'all'): MemoryRecall => ({
  async recall(query, { session_id, k }) {
    // what shapes the context is recorded with it: another process's write racing the recall may be missed
    const hits = await service.search(query, { k, freshness: 'heard', ...reachable(reach, session_id) });
    return hits.map((h) => ({ id: h.entry.id, text: h.entry.text, score: h.score }));
  },
});

export const toolsOver = (
  service: MemoryService,
  policy: MemoryPolicyConfig,
  reach: MemoryReach = 'all',
): MemoryToolService => ({
  async search({ query, limit, kind, scope }, ctx) {
    const hits = await service.search(query, {
      k: limit,
      kind,
      ...(scope === 'session' ? { session_id: ctx.session_id } : reachable(reach, ctx.session_id)),
    });
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
  async list({ limit, kind }, ctx) {
    const entries = await service.list({ kind, ...reachable(reach, ctx.session_id) }, limit);
    return entries.map((e) => ({
      id: e.id,
      text: e.text,
      kind: e.kind,
      weight: e.weight,
      metadata: e.metadata,
    }));
  },
});
