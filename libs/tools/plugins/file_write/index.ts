import type { ToolImplementation, ToolServices } from '../../src/discovery';

export function createTool({ sandbox }: ToolServices): ToolImplementation {
  return {
    async run(args) {
      const mode = args.mode === 'append' ? 'append' : 'overwrite';
      const r = sandbox.writeFile(String(args.path), String(args.content), mode);
      return { ok: true, output: { ...r, mode } };
    },
  };
}
