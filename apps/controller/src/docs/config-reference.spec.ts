import { readFileSync } from 'node:fs';
import { ConfigSchema } from '../config';
import { renderConfigReference } from './config-reference';
import { CONFIG_REFERENCE_FILE } from './write-config-reference';

describe('the configuration reference', () => {
  const rendered = renderConfigReference();
  const rowOf = (key: string) => rendered.split('\n').find((line) => line.startsWith(`| \`${key}\` |`));

  it('docs/configuration.md is what `npm run docs:config` writes (run it after changing the schema)', () => {
    expect(readFileSync(CONFIG_REFERENCE_FILE, 'utf8')).toBe(rendered);
  });

  it('has one row for every variable of the schema', () => {
    for (const key of Object.keys(ConfigSchema.shape)) expect(rowOf(key)).toBeDefined();
    expect(rendered.split('\n').filter((line) => line.startsWith('| `')).length).toBe(
      Object.keys(ConfigSchema.shape).length,
    );
  });

  it("states each default, the schema's or the one the runtime applies, and what the schema accepts", () => {
    expect(rowOf('PORT')).toContain('| `3000` | integer 0 to 65535 |');
    expect(rowOf('RUNLEDGER_SANDBOX')).toContain('| `auto` | `auto`, `bwrap`, `process` |');
    expect(rowOf('RUNLEDGER_OVERLOAD_LOOP_UTILIZATION')).toContain('| `0.9` | number > 0, <= 1 |');
    expect(rowOf('RUNLEDGER_MODEL_RETRIES')).toContain('| `2` | integer 0 to 10 |');
    expect(rowOf('RUNLEDGER_CODER_TOOL_TURNS')).toContain('| `8` |');
  });

  it('escapes the pipes a cell holds, so a row keeps its four columns', () => {
    const row = rowOf('RUNLEDGER_MODEL_TOOL_CALLS') ?? '';
    expect(row).toContain('"auto"\\|"required"\\|"none"');
    expect(row.split(/(?<!\\)\|/).length).toBe(6);
  });
});
