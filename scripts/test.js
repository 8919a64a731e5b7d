#!/usr/bin/env node
'use strict';
/*
 * `npm test`: the typecheck (both tsconfigs, as `npm run typecheck`) and jest side by side. jest's
 * workers spend much of a run waiting on child processes, servers and fsync, so the typecheck, at a
 * lower CPU priority, runs in that idle time instead of before the first test. jest's output comes
 * as it runs; the typecheck's after it. The exit code is jest's, or 1 when only the typecheck failed.
 * Arguments are jest's (`npm test -- <paths>`).
 */
const { spawn } = require('node:child_process');
const { setPriority } = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const TSC = require.resolve('typescript/bin/tsc');
const JEST = require.resolve('jest/bin/jest');
/** niceness of the typecheck: the tests, timing-sensitive some of them, get the CPU first */
const TYPECHECK_NICENESS = 10;

/** Runs `node <args>`; resolves with its exit code and, unless `inherit`, what it printed. */
function node(args, { inherit = false, niceness = 0 } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: inherit ? 'inherit' : 'pipe' });
    if (niceness) {
      try {
        setPriority(child.pid, niceness);
      } catch {
        // not allowed here: it runs at the same priority
      }
    }
    let output = '';
    child.stdout?.on('data', (c) => (output += c));
    child.stderr?.on('data', (c) => (output += c));
    child.on('error', (err) => resolve({ code: 1, signal: null, output: `${output}${err.message}\n` }));
    child.on('close', (code, signal) => resolve({ code, signal, output }));
  });
}

async function typecheck() {
  for (const project of ['tsconfig.json', 'tsconfig.build.json']) {
    const res = await node([TSC, '-p', project, '--noEmit'], { niceness: TYPECHECK_NICENESS });
    if (res.code !== 0) return { ...res, project };
  }
  return { code: 0, output: '' };
}

async function main() {
  const [checked, tested] = await Promise.all([
    typecheck(),
    node([JEST, '--config', 'jest.config.js', ...process.argv.slice(2)], { inherit: true }),
  ]);
  if (checked.code !== 0) {
    process.stderr.write(`\ntypecheck failed (tsc -p ${checked.project} --noEmit):\n${checked.output}`);
  }
  if (tested.signal) process.kill(process.pid, tested.signal);
  process.exitCode = tested.code !== 0 ? tested.code : checked.code !== 0 ? 1 : 0;
}

main();
