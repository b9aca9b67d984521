// Preloaded into a server process by tests (node --import): records every module the process resolves, through ESM
// imports and CommonJS requires alike, with the module that asked for it, and writes the list as JSON
// ([url, parentUrl] pairs) to LOADED_MODULES_FILE when it exits.
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const file = process.env.LOADED_MODULES_FILE;
const seen = new Set();
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    seen.add(JSON.stringify([resolved.url, context.parentURL ?? null]));
    return resolved;
  },
});
if (file) process.on('exit', () => writeFileSync(file, `[${[...seen].join(',')}]`));
