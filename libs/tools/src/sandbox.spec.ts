import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ToolSandbox } from './sandbox';

describe('ToolSandbox files', () => {
  let root: string;
  let sut: ToolSandbox;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'rl-sbx-unit-'));
    sut = new ToolSandbox({ allowedRoot: root, mode: 'process', maxReadBytes: 100 });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('reads at most maxReadBytes and says the rest was cut', () => {
    writeFileSync(path.join(root, 'big.txt'), 'x'.repeat(2000));
    expect(sut.readFile('big.txt')).toEqual({
      path: 'big.txt',
      content: 'x'.repeat(100),
      bytes: 2000,
      truncated: true,
    });
    expect(sut.readFile('big.txt', 10).content).toBe('x'.repeat(10));
  });

  it('overwrites shorter content completely and appends when asked', () => {
    sut.writeFile('f.txt', 'a long first version');
    sut.writeFile('f.txt', 'short');
    expect(readFileSync(path.join(root, 'f.txt'), 'utf8')).toBe('short');
    sut.writeFile('f.txt', '+more', 'append');
    expect(readFileSync(path.join(root, 'f.txt'), 'utf8')).toBe('short+more');
  });

  it('writes UTF-8 and reports bytes, not characters', () => {
    expect(sut.writeFile('u.txt', 'héllo ✓').bytes).toBe(Buffer.byteLength('héllo ✓'));
    expect(sut.readFile('u.txt').content).toBe('héllo ✓');
  });

  it('runs a command in a sub-folder and passes stdin', async () => {
    sut.writeFile('sub/keep.txt', '');
    const r = await sut.exec('pwd; cat', { cwd: 'sub', timeoutMs: 5000, stdin: 'from stdin' });
    expect(r).toMatchObject({
      exit_code: 0,
      stdout: `${path.join(sut.root, 'sub')}\nfrom stdin`,
      timed_out: false,
      sandbox: 'process',
    });
  });
});
