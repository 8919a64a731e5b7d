#!/usr/bin/env node
'use strict';
// The import cycles among the project's TypeScript sources (tests and test helpers aside): every
// strongly connected group of files that import each other, type-only imports included. Run alone it
// prints them and exits 1 when there is any; the architecture spec fails on the same list.
const { existsSync, readFileSync, readdirSync, statSync } = require('node:fs');
const { dirname, join, relative, resolve } = require('node:path');

const ROOT = resolve(__dirname, '..');
const SOURCE_DIRS = ['apps', 'libs', 'migrations'];
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"`;]*?from\s+['"]([^'"]+)['"]|(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g;

const isTestFile = (path) => /\.(int\.)?spec\.ts$|e2e-spec\.ts$/.test(path) || /[/\\]testing[/\\]/.test(path);

function sourceFiles(dir, out = []) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist') continue;
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (path.endsWith('.ts') && !path.endsWith('.d.ts') && !isTestFile(path)) out.push(path);
  }
  return out;
}

function resolveImport(from, spec, root) {
  let base;
  const lib = /^@runledger\/([a-z-]+)$/.exec(spec);
  if (lib) base = lib[1] === 'migrations' ? join(root, 'migrations/index') : join(root, 'libs', lib[1], 'src/index');
  else if (spec.startsWith('.')) base = resolve(dirname(from), spec);
  else return null;
  for (const candidate of [`${base}.ts`, join(base, 'index.ts'), base])
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  return null;
}

/** Tarjan's strongly connected components with more than one file (or a file importing itself). */
function importCycles(root = ROOT) {
  const files = SOURCE_DIRS.filter((d) => existsSync(join(root, d))).flatMap((d) => sourceFiles(join(root, d)));
  const edges = new Map();
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const targets = new Set();
    for (const m of text.matchAll(IMPORT)) {
      const target = resolveImport(file, m[1] ?? m[2], root);
      if (target && !isTestFile(target)) targets.add(target);
    }
    edges.set(file, [...targets]);
  }
  let next = 0;
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const cycles = [];
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const group = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1 || (edges.get(v) ?? []).includes(v))
        cycles.push(group.map((f) => relative(root, f)).sort());
    }
  };
  for (const file of edges.keys()) if (!index.has(file)) visit(file);
  return cycles;
}

module.exports = { importCycles };

if (require.main === module) {
  const cycles = importCycles();
  for (const c of cycles) console.log(`cycle: ${c.join(' <-> ')}`);
  process.exit(cycles.length ? 1 : 0);
}
