import { extname, join } from 'node:path';
import { Worker } from 'node:worker_threads';

/**
 * Whether this code runs from its TypeScript sources (jest, swc-node) rather
 * than the build: a thread then compiles its own copy of the modules it
 * loads, which costs seconds per start on a loaded machine.
 */
export const runningFromSources = (): boolean => extname(__filename) === '.ts';

/**
 * Loads the thread's entry module; TypeScript sources (jest, the benchmarks)
 * need a require hook in the thread too (thread-register.js), the build's .js
 * does not.
 */
const BOOTSTRAP = `
const { workerData } = require('node:worker_threads');
if (workerData.register) require(workerData.register);
require(workerData.entry);
`;

/**
 * A worker thread running the module `name` of `dir` (the caller's __dirname), from the build's
 * .js or, from sources, its .ts; `data` reaches it as workerData.data.
 */
export function startModuleWorker(dir: string, name: string, data: unknown): Worker {
  const entry = join(dir, `${name}${extname(__filename)}`);
  const register = runningFromSources() ? join(__dirname, 'thread-register.js') : null;
  // Keep swc's native binding loaded on this thread: on Node 20, a process in which the last thread
  // holding it exited crashes (segfault) when another thread loads it again.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (register) require('@swc/core');
  return new Worker(BOOTSTRAP, { eval: true, workerData: { entry, register, data } });
}
