import { writeFileSync } from 'node:fs';
import { openapiDocument } from '../src/http/rest/openapi.js';
import { REST_CLIENT_TYPES, restClientTypes } from './contract/restClient.js';

// npm run codegen:rest-client — the types __tests__/integration/rest.test.ts (block rest-generated-client) builds its client on.
writeFileSync(REST_CLIENT_TYPES, await restClientTypes(openapiDocument));
console.log(`wrote ${REST_CLIENT_TYPES}`);
