import { createZodDto } from '../dtos/zod-dto';
import { z } from 'zod';
import { MemoryKind, UserTask } from '@runledger/contracts';
import type { MemorySearchHit, StoredMemoryEntry } from '@runledger/memory';
import { IdParam, queryInt } from '../dtos/zod.pipe';

/** GET /memory: with `query` a ranked search (similarity x weight), without it the newest entries. */
export const MemoryQuery = z
  .object({
    query: z.string().trim().min(1).max(2000).optional(),
    kind: MemoryKind.optional(),
    session_id: UserTask.shape.session_id,
    task_id: IdParam.optional(),
    min_weight: z
      .string()
      .regex(/^(0(\.\d{1,6})?|1(\.0{1,6})?)$/, 'must be a number in 0..1')
      .transform(Number)
      .optional(),
    k: queryInt(1, 100).default(10),
  })
  .strict();
export type MemoryQuery = z.output<typeof MemoryQuery>;
export class MemoryQueryDto extends createZodDto(MemoryQuery) {}

export const MemoryIdParam = IdParam;

export const MemoryEntryView = z.object({
  id: z.string(),
  text: z.string(),
  kind: MemoryKind,
  source: z.string(),
  weight: z.number(),
  task_id: z.string().nullable(),
  session_id: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()),
  embedding_model: z.string(),
  embedding_dim: z.number().int(),
  written_by: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  similarity: z.number().optional(),
  score: z.number().optional(),
});
export const MemoryListResponse = z.object({ entries: z.array(MemoryEntryView) });
export class MemoryListResponseDto extends createZodDto(MemoryListResponse) {}
export const MemoryDeleteResponse = z.object({ id: z.string(), deleted: z.literal(true) });
export class MemoryDeleteResponseDto extends createZodDto(MemoryDeleteResponse) {}

const toView = (e: StoredMemoryEntry) => ({
  id: e.id,
  text: e.text,
  kind: e.kind,
  source: e.source,
  weight: e.weight,
  task_id: e.task_id,
  session_id: e.session_id,
  metadata: e.metadata,
  embedding_model: e.embedding_model,
  embedding_dim: e.embedding_dim,
  written_by: e.written_by,
  created_at: e.created_at,
  updated_at: e.updated_at,
});

export const toMemoryListResponse = (
  entries: readonly StoredMemoryEntry[],
): z.infer<typeof MemoryListResponse> => ({ entries: entries.map(toView) });
export const toMemorySearchResponse = (
  hits: readonly MemorySearchHit[],
): z.infer<typeof MemoryListResponse> => ({
  entries: hits.map((h) => ({ ...toView(h.entry), similarity: h.similarity, score: h.score })),
});
