// Jest's module runtime (jest.config.mjs `runtime`), keeping per worker what every test file would otherwise redo.
//
// Each test file gets a fresh module registry and a fresh vm context, so every file loads express, graphql,
// supertest, ioredis… again. That part stays: no module instance is shared between files. What is shared is the
// compiled code. Jest compiles each CommonJS module with a vm.Script carrying an `importModuleDynamically` callback,
// and V8 does not serve such scripts from its compilation cache: every file parsed and compiled each CommonJS module
// anew, and compiled each function again when it first ran (loading modules was a quarter of the workers' CPU). A
// vm.Script is not bound to a context, so one compiled script per module runs in each file's context instead, with
// the bytecode of the functions that earlier files already ran (as Backstage's jestCachingModuleLoader does). Its
// dynamic `import()` goes to the runtime of the file being run, not to the one that compiled it. Resolved imports
// (Jest resolves each mapped './x.js' afresh for every file) and the names a CommonJS module exports to an ES module
// importer (found by parsing its source) are kept per worker too.
import vm from 'node:vm';
import jestRuntime from 'jest-runtime';

// CommonJS: its class is the `default` member of module.exports. Jest loads this file with require() (Node's
// require of an ES module), and takes its default export.
const Runtime = jestRuntime.default;

/** filename → { source, script }: the source is compared, so a changed transform compiles again. */
const scripts = new Map();
/** filename → named exports of a CommonJS module, as cjs-module-lexer found them. */
const cjsExports = new Map();
/** `from\0to` → the file an import or require resolves to (for ESM and CommonJS, which resolve differently). */
const esmResolved = new Map();
const cjsResolved = new Map();
/** The runtime of the test file now running: a worker runs one file at a time. */
let current;

class CachingRuntime extends Runtime {
  constructor(...args) {
    super(...args);
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the one runtime dynamic imports go to
    current = this;
  }

  createScriptFromCode(scriptSource, filename) {
    const cached = scripts.get(filename);
    if (cached && cached.source === scriptSource) return cached.script;
    const scriptFilename = this._resolver.isCoreModule(filename) ? `jest-nodejs-core-${filename}` : filename;
    let script;
    try {
      script = new vm.Script(this.wrapCodeInModuleWrapper(scriptSource), {
        columnOffset: this._fileTransforms.get(filename)?.wrapperLength,
        displayErrors: true,
        filename: scriptFilename,
        importModuleDynamically: async (specifier) => {
          const runtime = current;
          const context = runtime._environment.getVmContext?.();
          if (!context) throw new Error('Test environment has been torn down');
          const module = await runtime.resolveModule(specifier, scriptFilename, context);
          return runtime.linkAndEvaluateModule(module);
        },
      });
    } catch {
      // Jest's own path, which reports a syntax error with the transformer's hints.
      return super.createScriptFromCode(scriptSource, filename);
    }
    scripts.set(filename, { source: scriptSource, script });
    return script;
  }

  _resolveModule(from, to) {
    if (!to) return from;
    const key = `${from}\0${to}`;
    let resolved = esmResolved.get(key);
    if (!resolved) {
      resolved = super._resolveModule(from, to);
      esmResolved.set(key, resolved);
      // A failed resolution is not kept: it throws again, with Jest's message.
      resolved.catch(() => esmResolved.delete(key));
    }
    return resolved;
  }

  _resolveCjsModule(from, to) {
    if (!to) return from;
    const key = `${from}\0${to}`;
    let resolved = cjsResolved.get(key);
    if (resolved === undefined) {
      resolved = super._resolveCjsModule(from, to);
      cjsResolved.set(key, resolved);
    }
    return resolved;
  }

  getExportsOfCjs(modulePath) {
    let names = cjsExports.get(modulePath);
    if (!names) {
      names = super.getExportsOfCjs(modulePath);
      cjsExports.set(modulePath, names);
    }
    return names;
  }
}

export default CachingRuntime;
