#!/usr/bin/env node
'use strict';
// The command the MCP conformance suite runs per client scenario: `node mcp-conformance-client.js <server-url>`,
// the scenario in MCP_CONFORMANCE_SCENARIO. It runs Runledger's own MCP client (McpServerConnection) from source.
const { join } = require('node:path');

const root = join(__dirname, '..', '..');
process.env.SWC_NODE_PROJECT = process.env.SWC_NODE_PROJECT || join(root, 'tsconfig.json');
require('@swc-node/register');
require('./mcp-conformance-client.ts')
  .main(process.argv[2], process.env.MCP_CONFORMANCE_SCENARIO ?? '')
  .then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
