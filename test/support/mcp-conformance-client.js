#!/usr/bin/env node
'use strict';
// The command the MCP conformance suite runs per client scenario: `node mcp-conformance-client.js <server-url>`,
// the scenario in MCP_CONFORMANCE_SCENARIO. It runs Runledger's own MCP client (McpServerConnection): compiled in
// the tree jest's global setup made (scripts/test-build.js), else from source.
const { join } = require('node:path');

function client() {
  const build = process.env.RUNLEDGER_TEST_BUILD;
  if (build) return require(join(build, 'test', 'support', 'mcp-conformance-client.js'));
  process.env.SWC_NODE_PROJECT = process.env.SWC_NODE_PROJECT || join(__dirname, '..', '..', 'tsconfig.json');
  require('@swc-node/register');
  return require('./mcp-conformance-client.ts');
}

client()
  .main(process.argv[2], process.env.MCP_CONFORMANCE_SCENARIO ?? '')
  .then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
      process.exit(1);
    },
  );
