import { parseArgs } from 'node:util';
import { checkContracts, formatReport } from './contract/check.js';

// npm run schema:check [-- --graphql-released F --graphql F --openapi-released F --openapi F]
const { values } = parseArgs({
  options: {
    'graphql-released': { type: 'string', default: 'schema.released.graphql' },
    graphql: { type: 'string', default: 'schema.graphql' },
    'openapi-released': { type: 'string', default: 'openapi.released.json' },
    openapi: { type: 'string' },
  },
});
const report = await checkContracts({
  graphqlReleased: values['graphql-released'],
  graphqlCurrent: values.graphql,
  openapiReleased: values['openapi-released'],
  ...(values.openapi ? { openapiCurrent: values.openapi } : {}),
});
console.log(formatReport(report));
process.exitCode = report.breaking ? 1 : 0;
