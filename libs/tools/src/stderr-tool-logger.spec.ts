import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ToolSandbox } from './sandbox';
import { stderrToolLogger } from './stderr-tool-logger';

describe('stderrToolLogger', () => {
  let root: string;
  let written: string;
  const stderr = { write: (text: string) => (written += text) };
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'rl-tool-layer-'));
    written = '';
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('a missing bubblewrap is one plain line, not a Node process warning', () => {
    const emitWarning = jest.spyOn(process, 'emitWarning');
    try {
      new ToolSandbox({ allowedRoot: root, mode: 'auto', bwrapPath: null, logger: stderrToolLogger(stderr) });
      expect(written).toBe(
        'runledger: bubblewrap (bwrap) not found on PATH: shell commands run without the OS sandbox (process-level confinement only)\n',
      );
      expect(emitWarning).not.toHaveBeenCalled();
    } finally {
      emitWarning.mockRestore();
    }
  });

  it("names a notice's plain fields on the same line", () => {
    stderrToolLogger(stderr).warn({ plugin: '/p/x', error: 'no manifest.json' }, 'tool plugin skipped');
    expect(written).toBe('runledger: tool plugin skipped (plugin: /p/x, error: no manifest.json)\n');
  });
});
