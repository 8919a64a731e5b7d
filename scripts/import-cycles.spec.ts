import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { importCycles } = require('./import-cycles') as { importCycles: (root?: string) => string[][] };

describe('import cycles', () => {
  it('none among the sources of apps, libs and migrations (type-only imports included)', () => {
    expect(importCycles()).toEqual([]);
  });

  it('a pair of files importing each other, type-only or through a lib index, is found', () => {
    const root = mkdtempSync(join(tmpdir(), 'rl-cycles-'));
    try {
      mkdirSync(join(root, 'libs/a/src'), { recursive: true });
      writeFileSync(join(root, 'libs/a/src/index.ts'), "export * from './one';\n");
      writeFileSync(
        join(root, 'libs/a/src/one.ts'),
        "import type { Two } from './two';\nexport type One = Two;\n",
      );
      writeFileSync(
        join(root, 'libs/a/src/two.ts'),
        "import { One } from '@runledger/a';\nexport type Two = One;\n",
      );
      expect(importCycles(root)).toEqual([['libs/a/src/index.ts', 'libs/a/src/one.ts', 'libs/a/src/two.ts']]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
