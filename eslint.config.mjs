import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The libs' order, bottom up: a lib imports only the libs listed for it (through `@runledger/<lib>`),
 * never apps/. Specs and `testing/` helpers may also use the shared test support (`@runledger/testing`).
 */
const LIB_IMPORTS = {
  contracts: [],
  critic: ['contracts'],
  scheduler: ['contracts'],
  permissions: ['contracts'],
  tools: ['contracts'],
  'event-store': ['contracts', 'migrations'],
  'state-store': ['contracts', 'event-store', 'migrations'],
  memory: ['contracts', 'critic', 'event-store', 'state-store', 'migrations'],
  runtime: ['contracts', 'critic', 'scheduler', 'permissions', 'tools', 'event-store', 'state-store', 'memory', 'migrations'],
};
const ALL = [...Object.keys(LIB_IMPORTS), 'migrations', 'testing'];
const NO_APPS = { group: ['**/apps/**'], message: 'libs never import apps/' };

function libOrder(lib, { tests }) {
  const allowed = new Set([lib, ...LIB_IMPORTS[lib], ...(tests ? ['testing'] : [])]);
  const refused = ALL.filter((l) => !allowed.has(l));
  return {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          NO_APPS,
          ...(refused.length
            ? [{ group: refused.map((l) => `@runledger/${l}`), message: `libs/${lib} may import only ${[...allowed].join(', ')} (the lib order)` }]
            : []),
          { group: ['../../*/src/*', '../../../libs/*'], message: 'another lib is imported through its index, @runledger/<lib>' },
        ],
      },
    ],
  };
}

const TESTS = ['**/*.spec.ts', '**/testing/**'];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'data/**', 'coverage/**', '**/*.js', '**/*.mjs', 'apps/controller/src/admin/static/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', { patterns: [NO_APPS] }],
    },
  },
  ...Object.keys(LIB_IMPORTS).flatMap((lib) => [
    { files: [`libs/${lib}/src/**/*.ts`], ignores: TESTS, rules: libOrder(lib, { tests: false }) },
    { files: TESTS.map((t) => `libs/${lib}/src/${t}`), rules: libOrder(lib, { tests: true }) },
  ]),
);
