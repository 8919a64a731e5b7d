'use strict';
/*
 * jest's global setup: compiles apps/, libs/ and migrations/ (and EXTRA_FILES) once per test run into
 * .test-build/<hash of the sources>/ and names it in RUNLEDGER_TEST_BUILD, so the CLI and `serve`
 * child processes the tests start run plain JavaScript. Each child would otherwise load TypeScript
 * and swc's require hook and look up every source file in swc's cache: about a second of CPU per
 * child, and the suite starts hundreds of them. The tree is the sources as they are now (never a
 * stale build), compiled with the options jest's own transform uses.
 */
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const FOLDERS = ['apps', 'libs', 'migrations'];
/** test helpers the tests start as processes of their own (it imports the libs by relative path) */
const EXTRA_FILES = ['test/support/mcp-conformance-client.ts'];
const OUT = path.join(ROOT, '.test-build');
/** A build not used for this long is someone else's past run: removed. */
const STALE_MS = 60 * 60 * 1000;

const isSpec = (file) => /\.(spec|e2e-spec)\.ts$/.test(file);

function filesUnder(dir, found = []) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) filesUnder(full, found);
    else if (!isSpec(full)) found.push(full);
  }
  return found;
}

let tsconfigPaths;

function swcOptions(filename) {
  tsconfigPaths ??= JSON.parse(fs.readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8')).compilerOptions
    .paths;
  return {
    filename,
    swcrc: false,
    configFile: false,
    sourceMaps: false,
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
      // @runledger/<lib> becomes a relative require, as tsc-alias does for the build
      baseUrl: ROOT,
      paths: tsconfigPaths,
    },
    module: { type: 'commonjs' },
  };
}

/** Compiles every source into `to` (TypeScript to .js, other files copied: manifests, the dashboard's files). */
function compileInto(files, to) {
  const swc = require('@swc/core');
  for (const file of files) {
    const target = path.join(to, path.relative(ROOT, file));
    fs.mkdirSync(path.dirname(target), { recursive: true });
    if (file.endsWith('.ts') && !file.endsWith('.d.ts')) {
      fs.writeFileSync(target.replace(/\.ts$/, '.js'), swc.transformFileSync(file, swcOptions(file)).code);
    } else {
      fs.copyFileSync(file, target);
    }
  }
  // what the tests start: `node <build>/runledger.js <args>`, like bin/runledger.js
  fs.writeFileSync(
    path.join(to, 'runledger.js'),
    "'use strict';\nprocess.env.RUNLEDGER_CLI_ENTRY = '1';\nrequire('./apps/controller/src/cli/main.js');\n",
  );
}

function removeStaleBuilds(keep) {
  if (!fs.existsSync(OUT)) return;
  for (const name of fs.readdirSync(OUT)) {
    const dir = path.join(OUT, name);
    if (dir === keep) continue;
    try {
      if (Date.now() - fs.statSync(dir).mtimeMs > STALE_MS) fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // another run removed it first
    }
  }
}

/** The compiled tree of the current sources (made unless an identical one exists); returns its folder. */
function testBuild() {
  const files = [
    ...FOLDERS.flatMap((f) => filesUnder(path.join(ROOT, f))),
    ...EXTRA_FILES.map((f) => path.join(ROOT, f)),
  ].sort();
  const hash = createHash('sha256');
  hash.update(JSON.stringify(swcOptions('')));
  hash.update(require('@swc/core/package.json').version);
  for (const file of files) hash.update(path.relative(ROOT, file)).update('\0').update(fs.readFileSync(file));
  const dir = path.join(OUT, hash.digest('hex').slice(0, 16));
  if (!fs.existsSync(path.join(dir, 'runledger.js'))) {
    // compiled aside and renamed, so a run beside this one never sees half a tree
    const partial = `${dir}.${process.pid}.partial`;
    fs.rmSync(partial, { recursive: true, force: true });
    compileInto(files, partial);
    try {
      fs.renameSync(partial, dir);
    } catch (e) {
      fs.rmSync(partial, { recursive: true, force: true });
      if (!fs.existsSync(path.join(dir, 'runledger.js'))) throw e;
    }
  }
  const now = new Date();
  fs.utimesSync(dir, now, now);
  removeStaleBuilds(dir);
  return dir;
}

module.exports = async function globalSetup() {
  process.env.RUNLEDGER_TEST_BUILD = testBuild();
};
module.exports.testBuild = testBuild;
