import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteWithMemory, runMemoryRecallConformance } from '@runledger/testing';
import { MemoryReach, recallOver } from './memory-options';

// the texts are written for nobody: a recall reaching its own session only (erasure on) finds them too
for (const reach of ['all', 'own-session'] as MemoryReach[])
  runMemoryRecallConformance(
    `the memory service (a SQLite file, the hashing embedder), reach ${reach}`,
    async (given) => {
      const dir = mkdtempSync(join(tmpdir(), 'rl-recall-memory-'));
      const opened = await openSqliteWithMemory(dir);
      for (const text of given)
        await opened.memory.insert({
          text,
          kind: 'fact',
          source: 'user',
          weight: 0.8,
          reason: 'given to recall',
        });
      return {
        sut: recallOver(opened.memory, reach),
        dispose: async () => {
          await opened.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  );
