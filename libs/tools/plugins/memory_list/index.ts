import type { MemoryKind } from '@runledger/contracts';
import type { ToolImplementation, ToolServices } from '../../src/discovery';
import { memoryTool } from '../../src/memory-tool-service';

export function createTool({ memory }: ToolServices): ToolImplementation {
  return memoryTool(memory, async (m, args, ctx) => ({
    entries: await m.list(
      { limit: typeof args.limit === 'number' ? args.limit : 20, kind: args.kind as MemoryKind | undefined },
      ctx,
    ),
  }));
}
