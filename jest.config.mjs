// Jest runs the TypeScript sources as native ES modules (jose, openid-client and oidc-provider ship only as ESM):
// `npm test` sets NODE_OPTIONS=--experimental-vm-modules, and ts-jest (`useESM`) strips the types.
// `npm test` runs __tests__/unit and __tests__/integration; test:prod, test:topology and test:faults pass
// --testMatch for their own folder.
export default {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__tests__/{unit,integration}/**/*.test.ts'],
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    // tsconfig.json sets isolatedModules, so ts-jest transpiles file by file (no type-check: `npm run typecheck` does).
    '^.+\\.ts$': ['ts-jest', { useESM: true }],
  },
  // Sources import './x.js' (NodeNext); the file on disk is './x.ts'.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  globalSetup: '<rootDir>/__tests__/helpers/globalSetup.mjs',
  globalTeardown: '<rootDir>/__tests__/helpers/globalTeardown.mjs',
  // Generous: only a hung test should ever reach it, also on a loaded machine.
  testTimeout: 120_000,
  // Files spend much of their time waiting (sockets, child processes, the browser): on 2 cores, 4 at once keeps both
  // busy. Measured: PGlite 151 s → 101 s, PostgreSQL + Redis 76 s → 61 s. Since then (lean test cluster, schema:check
  // compiling its meta-schema once, a shorter sign-in delay under NODE_ENV=test), on Node 24: PGlite 83-89 s wall,
  // 148-159 s CPU; PostgreSQL + Redis 63-66 s wall, 97-102 s CPU.
  maxWorkers: 4,
};
