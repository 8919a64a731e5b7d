'use strict';
/*
 * The require hook a worker thread started from the TypeScript sources (jest, the benchmarks) loads
 * before its entry (see module-worker.ts): each .ts file compiled by swc with the options jest's
 * transform uses, and @runledger/<lib> resolved as tsconfig.json's paths say. swc-node's register
 * does the same but first loads the TypeScript compiler to read tsconfig.json, which took more than
 * half of such a thread's start.
 */
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const Module = require('node:module');
const swc = require('@swc/core');

const root = join(__dirname, '..', '..', '..');
const { compilerOptions } = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8'));
const aliases = new Map(
  Object.entries(compilerOptions.paths).map(([name, [target]]) => [name, join(root, target)]),
);

const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return resolveFilename.call(this, aliases.get(request) ?? request, ...rest);
};

Module._extensions['.ts'] = (module, filename) => {
  const { code } = swc.transformSync(readFileSync(filename, 'utf8'), {
    filename,
    swcrc: false,
    configFile: false,
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  });
  module._compile(code, filename);
};
