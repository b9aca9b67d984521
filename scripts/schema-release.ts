import { copyFileSync, writeFileSync } from 'node:fs';
import { openapiDocument } from '../src/http/rest/openapi.js';

// npm run schema:release: what is in schema.graphql and the served /v1 OpenAPI document is now what clients rely on.
copyFileSync('schema.graphql', 'schema.released.graphql');
writeFileSync('openapi.released.json', `${JSON.stringify(openapiDocument, null, 2)}\n`);
console.log('Released: schema.released.graphql and openapi.released.json now match the current contracts.');
