// Jest runs the TypeScript sources as native ES modules (jose, openid-client and oidc-provider ship only as ESM):
// `npm test` sets NODE_OPTIONS=--experimental-vm-modules, and @swc/jest strips the types (as ES modules: Jest asks
// for them since extensionsToTreatAsEsm lists .ts). `npm test` runs __tests__/unit and __tests__/integration;
// test:prod, test:topology and test:faults pass --testMatch for their own folder.
export default {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__tests__/{unit,integration}/**/*.test.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    // Types are stripped file by file (tsconfig.json sets isolatedModules), never checked: `npm run typecheck` does.
    // swc, not ts-jest: ts-jest loads TypeScript in each worker and transpiles with it, seconds of CPU per worker on
    // a cold cache (a fresh clone).
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: {
          parser: { syntax: 'typescript' },
          target: 'es2023',
          // As tsconfig.json: class fields are defined (ES2022 semantics), and imports are kept as written.
          transform: { useDefineForClassFields: true, verbatimModuleSyntax: true },
        },
      },
    ],
  },
  // Sources import './x.js' (NodeNext); the file on disk is './x.ts'.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  // Keeps compiled CommonJS modules and resolved imports per worker, across test files (see the file).
  runtime: '<rootDir>/__tests__/helpers/jestRuntime.mjs',
  // On a run with no timings yet (a fresh clone), the files that wait longest start first (see the file).
  testSequencer: '<rootDir>/__tests__/helpers/testSequencer.mjs',
  globalSetup: '<rootDir>/__tests__/helpers/globalSetup.mjs',
  globalTeardown: '<rootDir>/__tests__/helpers/globalTeardown.mjs',
  // Generous: only a hung test should ever reach it, also on a loaded machine.
  testTimeout: 120_000,
  // Files spend much of their time waiting (sockets, child processes, the browser): on 2 cores, 4 at once keeps both
  // busy. Measured: PGlite 151 s → 101 s, PostgreSQL + Redis 76 s → 61 s. How long `npm test` takes now, and how that
  // was measured (a fresh clone, a cold cache, CPU and wall with the load average): docs/testing.md#how-long-it-takes.
  maxWorkers: 4,
};
