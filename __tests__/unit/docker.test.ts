import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from '@jest/globals';
import { parse } from 'yaml';

// No Docker engine runs here, so the image and compose files are checked statically.
const ROOT = new URL('../../', import.meta.url).pathname;
const read = (file: string) => readFileSync(`${ROOT}${file}`, 'utf8');

describe('container files', () => {
  test('every COPY source of the Dockerfile exists and is not excluded from the build context', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    const sources = read('Dockerfile')
      .split('\n')
      .filter((l) => /^COPY /.test(l) && !l.includes('--from='))
      .flatMap((l) =>
        l
          .replace(/^COPY\s+/, '')
          .split(/\s+/)
          .slice(0, -1),
      );
    assert.ok(sources.length >= 5);
    for (const source of sources) {
      assert.ok(existsSync(`${ROOT}${source}`), `${source} is missing`);
      assert.ok(!ignored.includes(source.replace(/\/$/, '')), `${source} is excluded by .dockerignore`);
    }
  });

  test('the image runs the compiled server as an unprivileged user on 0.0.0.0 with a health check', () => {
    const dockerfile = read('Dockerfile');
    assert.match(dockerfile, /^CMD \["node", "dist\/src\/main\.js"\]$/m);
    assert.match(dockerfile, /^USER node$/m);
    assert.match(dockerfile, /^ENV NODE_ENV=production HOST=0\.0\.0\.0 PORT=4000$/m);
    assert.match(dockerfile, /^HEALTHCHECK /m);
    const tsconfig = JSON.parse(read('tsconfig.json')) as { compilerOptions: { outDir: string; rootDir: string } };
    assert.equal(tsconfig.compilerOptions.outDir, 'dist');
    assert.equal(tsconfig.compilerOptions.rootDir, '.');
  });

  test('docker-compose.yml is valid and starts PostgreSQL and Redis with health checks', () => {
    const compose = parse(read('docker-compose.yml')) as {
      services: Record<string, { image: string; healthcheck?: { test: unknown }; ports?: string[] }>;
    };
    assert.deepEqual(Object.keys(compose.services).sort(), ['postgres', 'redis']);
    assert.match(compose.services.postgres!.image, /^postgres:\d+/);
    assert.match(compose.services.redis!.image, /^redis:\d+/);
    for (const service of Object.values(compose.services)) {
      assert.ok(service.healthcheck?.test, 'each service has a health check');
      assert.ok(
        service.ports?.every((p) => p.startsWith('127.0.0.1:')),
        'ports bind to loopback only',
      );
    }
  });
});
