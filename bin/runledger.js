#!/usr/bin/env node
'use strict';
// The compiled CLI when built (npm run build) and not older than the sources; otherwise the
// TypeScript source through swc, so a stale dist never runs in a checkout that moved on.
const { existsSync, readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const dist = join(root, 'dist', 'apps', 'controller', 'src', 'cli', 'main.js');

function newestSource(dir) {
  let newest = 0;
  if (!existsSync(dir)) return newest;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(full));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

const distIsCurrent = () =>
  existsSync(dist) && statSync(dist).mtimeMs >= Math.max(...['apps', 'libs', 'migrations'].map((d) => newestSource(join(root, d))));

process.env.RUNLEDGER_CLI_ENTRY = '1';
if (process.env.RUNLEDGER_FROM_SOURCE !== '1' && distIsCurrent()) {
  require(dist);
} else {
  process.env.SWC_NODE_PROJECT = process.env.SWC_NODE_PROJECT || join(root, 'tsconfig.json');
  require('@swc-node/register');
  require(join(root, 'apps', 'controller', 'src', 'cli', 'main.ts'));
}
