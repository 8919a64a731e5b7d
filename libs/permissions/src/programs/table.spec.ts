import { PROGRAM_SPECS, programSpec } from './table';

describe('program spec table', () => {
  it('names every program in exactly one spec', () => {
    const names = PROGRAM_SPECS.flatMap((s) => s.names);
    expect(new Set(names).size).toBe(names.length);
  });

  it('finds a spec by name, by pattern, or none', () => {
    expect(programSpec('cat')?.names).toContain('cat');
    expect(programSpec('mkfs.vfat')?.names).toContain('mkfs');
    expect(programSpec('python3')).toBeUndefined();
  });
});
