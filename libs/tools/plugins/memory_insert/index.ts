import type { MemoryKind } from '@runledger/contracts';
import type { ToolImplementation, ToolServices } from '../../src/discovery';
import { memoryTool } from '../../src/memory-tool-service';

export function createTool({ memory }: ToolServices): ToolImplementation {
  return memoryTool(memory, (m, args, ctx) =>
    m.insert(
      {
        text: String(args.text),
        kind: (args.kind as MemoryKind | undefined) ?? 'fact',
        weight: typeof args.weight === 'number' ? args.weight : undefined,
        metadata: (args.metadata as Record<string, unknown> | undefined) ?? {},
      },
      ctx,
    ),
  );
}
