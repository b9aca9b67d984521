// Regenerates src/generated when schema.graphql or codegen.ts is newer than the generated code,
// so `npm start` after editing the schema never runs stale resolver types.
import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

const output = 'src/generated/graphql.ts';
const inputs = ['schema.graphql', 'codegen.ts'];
const stale = !existsSync(output) || inputs.some((f) => statSync(f).mtimeMs > statSync(output).mtimeMs);
if (stale) {
  console.error('schema changed: regenerating typed resolvers');
  execFileSync('npx', ['graphql-codegen', '--config', 'codegen.ts'], { stdio: 'inherit' });
}
