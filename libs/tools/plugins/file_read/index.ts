import type { ToolImplementation, ToolServices } from '../../src/discovery';

export function createTool({ sandbox }: ToolServices): ToolImplementation {
  return {
    async run(args) {
      const r = sandbox.readFile(
        String(args.path),
        typeof args.max_bytes === 'number' ? Math.min(args.max_bytes, sandbox.maxReadBytes) : undefined,
      );
      return { ok: true, output: r, metadata: { truncated: r.truncated } };
    },
  };
}
