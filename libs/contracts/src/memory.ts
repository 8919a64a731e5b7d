import { z } from 'zod';

export const MEMORY_KINDS = [
  'tool_result',
  'plan',
  'critique',
  'fact',
  'summary',
  'user_preference',
] as const;
export const MemoryKind = z.enum(MEMORY_KINDS);
export type MemoryKind = z.infer<typeof MemoryKind>;
export const MEMORY_SOURCES = ['tool', 'critic', 'user', 'system'] as const;
export const MemorySource = z.enum(MEMORY_SOURCES);
export type MemorySource = z.infer<typeof MemorySource>;

export const MemoryEntry = z.object({
  id: z.string().min(1),
  text: z.string(),
  kind: MemoryKind,
  source: MemorySource,
  weight: z.number().min(0).max(1),
  task_id: z.string().nullable(),
  session_id: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()).default({}),
  embedding_model: z.string(),
  embedding_dim: z.number().int().positive(),
});
export type MemoryEntry = z.infer<typeof MemoryEntry>;

const unit = z.number().min(0).max(1);
export const CriticScore = z
  .object({
    correctness: unit,
    usefulness: unit,
    safety: unit,
    memory_store: z.boolean(),
    weight: unit,
    notes: z.string().max(4000).default(''),
  })
  .strict();
export type CriticScore = z.infer<typeof CriticScore>;
