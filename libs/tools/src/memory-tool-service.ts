import { MemoryKind } from '@runledger/contracts';

/**
 * What the memory tools (memory_search, memory_insert, memory_list) need from memory.
 * libs/memory implements it; without one the memory tools answer `ok:false` "memory not configured".
 */
export interface MemoryToolContext {
  task_id: string;
  session_id: string;
  call_id: string;
}

export interface MemoryToolHit {
  id: string;
  text: string;
  kind: MemoryKind;
  weight: number;
  /** similarity x weight for a search; absent for a listing */
  score?: number;
  metadata?: Record<string, unknown>;
}

export interface MemorySearchQuery {
  query: string;
  limit: number;
  kind?: MemoryKind;
  /**
   * all: every entry the task may reach (every session's, or with erasure on its own session's and
   * those written for nobody); session: only the calling task's session's
   */
  scope: 'all' | 'session';
}

export interface MemoryInsertRequest {
  text: string;
  kind: MemoryKind;
  weight?: number;
  metadata?: Record<string, unknown>;
}

export interface MemoryListQuery {
  limit: number;
  kind?: MemoryKind;
}

export interface MemoryToolService {
  search(query: MemorySearchQuery, ctx: MemoryToolContext): Promise<MemoryToolHit[]>;
  insert(request: MemoryInsertRequest, ctx: MemoryToolContext): Promise<{ id: string }>;
  list(query: MemoryListQuery, ctx: MemoryToolContext): Promise<MemoryToolHit[]>;
}

/** The shape every memory tool shares: no service -> `ok:false` "memory not configured". */
export function memoryTool(
  memory: MemoryToolService | null,
  call: (
    memory: MemoryToolService,
    args: Record<string, unknown>,
    ctx: MemoryToolContext,
  ) => Promise<unknown>,
): {
  run(
    args: Record<string, unknown>,
    ctx: MemoryToolContext,
  ): Promise<{ ok: boolean; output: unknown; error?: string }>;
} {
  return {
    async run(args, ctx) {
      if (!memory) return { ok: false, output: null, error: 'memory not configured' };
      return {
        ok: true,
        output: await call(memory, args, {
          task_id: ctx.task_id,
          session_id: ctx.session_id,
          call_id: ctx.call_id,
        }),
      };
    },
  };
}
