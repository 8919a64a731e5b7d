// The MCP conformance suite imports `globSync` from `fs`, which Node 22 has and Node 20 lacks (it
// only uses it to find its own checks.json files). Loaded with `node --import`, this gives the
// suite's modules an `fs` with a globSync for `**/<name>` patterns; every other module keeps Node's.
import { register } from 'node:module';

const hooks = `
const SHIM = 'runledger-conformance-shim:fs';
export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes('/@modelcontextprotocol/conformance/'))
    return { url: SHIM, shortCircuit: true };
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (url !== SHIM) return next(url, context);
  const source = \`
import fs from 'node:fs';
import path from 'node:path';
export * from 'node:fs';
export default fs;
export function globSync(pattern, options = {}) {
  const m = /^\\\\*\\\\*\\\\/([^*/]+)$/.exec(pattern);
  if (!m) throw new Error('globSync shim: only **/<name> patterns, not ' + pattern);
  const root = options.cwd ?? process.cwd();
  const found = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = dir ? path.join(dir, entry.name) : entry.name;
      if (entry.isDirectory()) walk(rel);
      else if (entry.name === m[1]) found.push(rel);
    }
  };
  walk('');
  return found;
}\`;
  return { format: 'module', source, shortCircuit: true };
}
`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
