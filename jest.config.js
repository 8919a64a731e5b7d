const { availableParallelism } = require('node:os');

/** Three tiers, told apart by file name: unit (*.spec.ts), integration (*.int.spec.ts), e2e (test/*.e2e-spec.ts). */
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  },
];
const libs = ['contracts', 'event-store', 'state-store', 'memory', 'critic', 'scheduler', 'runtime', 'tools', 'permissions'];
const moduleNameMapper = Object.fromEntries(libs.map((l) => [`^@runledger/${l}$`, `<rootDir>/libs/${l}/src/index.ts`]));
moduleNameMapper['^@runledger/testing$'] = '<rootDir>/test/support/index.ts';
moduleNameMapper['^@runledger/migrations$'] = '<rootDir>/migrations/index.ts';
// jose (the A2A SDK's JWS dependency) ships only as ES modules: swc turns it into CommonJS for jest, as Node 20.19+ loads it itself
// .test-build: the compiled tree scripts/test-build.js makes for the child processes, never a test's module
const base = { rootDir: __dirname, testEnvironment: 'node', modulePathIgnorePatterns: ['<rootDir>/.test-build/'], transform: { '^.+\\.ts$': swc, '/node_modules/jose/.+\\.js$': swc }, transformIgnorePatterns: ['/node_modules/(?!jose/)'], moduleNameMapper, moduleFileExtensions: ['ts', 'js', 'json'] };

module.exports = {
  // jest's default (cores - 1) runs one suite at a time on a 2-core machine, which then sits half idle:
  // the e2e suites spend much of their time waiting on child processes, servers and fsync
  maxWorkers: Math.max(2, availableParallelism() - 1),
  // 30 s a test, set here since jest takes it from the root config, not a project's: CI's 2-core machine
  // runs suites side by side (a property test of 1.2 s alone took over 5 s there), and worker threads
  // started from the TypeScript sources compile them first
  testTimeout: 30_000,
  // the CLI and `serve` children run a tree compiled once per run from the current sources
  globalSetup: '<rootDir>/scripts/test-build.js',
  // slow files first when jest has no timings of its own (a clean clone)
  testSequencer: '<rootDir>/scripts/test-sequencer.js',
  projects: [
    { ...base, displayName: 'unit', testMatch: ['<rootDir>/{apps,libs,migrations,scripts}/**/*.spec.ts'], testPathIgnorePatterns: ['\\.int\\.spec\\.ts$', '/node_modules/'] },
    { ...base, displayName: 'int', testMatch: ['<rootDir>/{apps,libs,migrations}/**/*.int.spec.ts'] },
    { ...base, displayName: 'e2e', testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'] },
  ],
};
