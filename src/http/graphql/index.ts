/**
 * GraphQL over HTTP at /graphql: the envelope (method, media types, one parse of the parameters), persisted
 * documents, the result cache and Apollo with this API's plugin; GraphiQL at /graphiql in development.
 */
export { createEventChannel } from './eventChannel.js';
export { createGraphiqlRouter, GRAPHIQL_PATH } from './graphiql.js';
export { createResultCache, type ResultCache, type ResultCacheOptions } from './resultCache/index.js';
export { frontDoor } from './frontDoor.js';
export { createGraphqlRouter } from './router.js';
