import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from '@jest/globals';
import { ESLint } from 'eslint';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const eslint = new ESLint({ cwd: root });

/** The no-restricted-imports messages ESLint reports for `code` placed at `path`. */
async function importErrors(path: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(root, path) });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

const refused: [string, string, RegExp][] = [
  ['src/http/pipeline/fixture.ts', "import express from 'express';", /imports neither Express nor WebSocket/],
  ['src/http/pipeline/fixture.ts', "import { WebSocket } from 'ws';", /imports neither Express nor WebSocket/],
  ['src/http/pipeline/fixture.ts', "import { x } from '../graphql/index.js';", /under every transport/],
  ['src/http/graphql/fixture.ts', "import { x } from '../realtime/index.js';", /No transport imports another/],
  ['src/http/realtime/fixture.ts', "import { x } from '../rest/index.js';", /No transport imports another/],
  ['src/http/rest/fixture.ts', "import { x } from '../browser/index.js';", /No transport imports another/],
  ['src/http/graphql/resultCache/fixture.ts', "import { x } from '../../realtime/index.js';", /No transport/],
  ['src/http/realtime/fixture.ts', "import { x } from '../pipeline/pipeline.js';", /through its index\.ts/],
  ['src/http/middleware/fixture.ts', "import { x } from '../pipeline/index.js';", /imports neither/],
  ['src/http/connections/fixture.ts', "import { x } from '../rest/index.js';", /below every route/],
  ['src/http/connections/fixture.ts', "import { x } from '../middleware/index.js';", /below every route/],
  ['src/http/problems/fixture.ts', "import { x } from '../connections/index.js';", /bottom of http/],
  ['src/http/problems/fixture.ts', "import { x } from '../middleware/index.js';", /bottom of http/],
  ['src/http/problems/fixture.ts', "import { x } from '../observability/index.js';", /bottom of http/],
  ['src/http/observability/fixture.ts', "import { x } from '../problems/index.js';", /bottom of http/],
  ['src/http/graphql/fixture.ts', "import { x } from '../../resolvers/schema.js';", /nothing from resolvers/],
  ['src/resolvers/Fixture.ts', "import { x } from '../http/pipeline/index.js';", /but the problem catalogue/],
  ['src/resolvers/Fixture.ts', "import { x } from '../store/orders.js';", /never the store/],
  ['src/domain/fixture.ts', "import { x } from '../http/problems/index.js';", /declare a port/],
  ['src/store/fixture.ts', "import { x } from '../auth/dpop.js';", /implements the ports/],
  ['src/auth/fixture.ts', "import { x } from '../http/middleware/index.js';", /imports none of them/],
  ['src/context.ts', "import { x } from './http/realtime/index.js';", /from the domain alone/],
  ['src/http/rest/fixture.ts', "import { x } from '../../app.js';", /No import runs back up/],
  ['src/domain/fixture.ts', "import { Pool } from 'pg';", /Database access lives in src\/store/],
  ['src/domain/fixture.ts', "import { trace } from '@opentelemetry/api';", /The domain knows no tracing SDK/],
  ['src/store/fixture.ts', "import { trace } from '@opentelemetry/api';", /loaded by http\/observability\/tracingSdk/],
  ['src/http/observability/fixture.ts', "import { trace } from '@opentelemetry/api';", /tracingSdk\.ts alone/],
  ['src/tracing.ts', "import { trace } from '@opentelemetry/api';", /only when tracing is on/],
];

describe('the layer rules in eslint.config.js bite', () => {
  test.each(refused)('%s: %s is refused', async (path, code, message) => {
    const errors = await importErrors(path, code);
    assert.equal(errors.length, 1, `expected one refusal, got ${JSON.stringify(errors)}`);
    assert.match(errors[0]!, message);
  });

  test('imports that follow the layers lint clean', async () => {
    const allowed: [string, string][] = [
      [
        'src/http/graphql/fixture.ts',
        [
          "import { x } from '../pipeline/index.js';",
          "import { y } from '../middleware/index.js';",
          "import { z } from '../problems/index.js';",
          "import { w } from '../observability/index.js';",
          "import { v } from './envelope.js';",
          "import { u } from '../../domain/errors.js';",
        ].join('\n'),
      ],
      ['src/http/pipeline/fixture.ts', "import { x } from '../middleware/index.js';"],
      ['src/http/connections/fixture.ts', "import { x } from '../problems/index.js';"],
      ['src/resolvers/Fixture.ts', "import { x } from '../http/problems/index.js';"],
      ['src/store/fixture.ts', "import type { x } from '../domain/ports.js';"],
      ['src/app.ts', "import { x } from './http/realtime/index.js';"],
      // The tracing port, from every layer; OpenTelemetry itself, from the SDK's module.
      ['src/domain/fixture.ts', "import { tracing } from '../tracing.js';"],
      ['src/store/fixture.ts', "import { tracing } from '../tracing.js';"],
      ['src/resolvers/Fixture.ts', "import { tracing } from '../tracing.js';"],
      ['src/auth/fixture.ts', "import { tracing } from '../tracing.js';"],
      ['src/context.ts', "import { tracing } from './tracing.js';"],
      ['src/http/pipeline/fixture.ts', "import { tracing } from '../../tracing.js';"],
      ['src/http/realtime/fixture.ts', "import { tracing } from '../../tracing.js';"],
      ['src/http/observability/tracingSdk.ts', "import { trace } from '@opentelemetry/api';"],
    ];
    for (const [path, code] of allowed) assert.deepEqual(await importErrors(path, code), [], path);
  });
});

/** Relative imports and re-exports of a source file, resolved to the .ts files they name. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/\b(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specifiers.map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'generated' ? [] : sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('the import graph of src/', () => {
  test('has no cycle, type-only imports included', () => {
    const files = sourceFiles(join(root, 'src'));
    const graph = new Map(files.map((file) => [file, importsOf(file)]));
    for (const [file, targets] of graph) {
      for (const target of targets)
        assert.ok(graph.has(target) || target.includes('/generated/'), `${file} → ${target}`);
    }
    const done = new Set<string>();
    const path: string[] = [];
    const cycles: string[] = [];
    const visit = (file: string) => {
      if (done.has(file)) return;
      const at = path.indexOf(file);
      if (at >= 0) {
        cycles.push([...path.slice(at), file].map((f) => relative(root, f)).join(' → '));
        return;
      }
      path.push(file);
      for (const target of graph.get(file) ?? []) visit(target);
      path.pop();
      done.add(file);
    };
    for (const file of files) visit(file);
    assert.deepEqual(cycles, []);
  });
});
