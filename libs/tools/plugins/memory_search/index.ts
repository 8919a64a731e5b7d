import type { MemoryKind } from '@runledger/contracts';
import type { ToolImplementation, ToolServices } from '../../src/discovery';
import { memoryTool } from '../../src/memory-tool-service';

export function createTool({ memory }: ToolServices): ToolImplementation {
  return memoryTool(memory, async (m, args, ctx) => ({
    hits: await m.search(
      {
        query: String(args.query),
        limit: typeof args.limit === 'number' ? args.limit : 5,
        kind: args.kind as MemoryKind | undefined,
        scope: args.scope === 'session' ? 'session' : 'all',
      },
      ctx,
    ),
  }));
}
