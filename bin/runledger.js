#!/usr/bin/env node
'use strict';
// The compiled CLI when built (npm run build); otherwise the TypeScript source through swc.
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const dist = join(root, 'dist', 'apps', 'controller', 'src', 'cli', 'main.js');
process.env.RUNLEDGER_CLI_ENTRY = '1';
if (existsSync(dist) && process.env.RUNLEDGER_FROM_SOURCE !== '1') {
  require(dist);
} else {
  process.env.SWC_NODE_PROJECT = process.env.SWC_NODE_PROJECT || join(root, 'tsconfig.json');
  require('@swc-node/register');
  require(join(root, 'apps', 'controller', 'src', 'cli', 'main.ts'));
}
