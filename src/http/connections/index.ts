/**
 * The HTTP server's own connections, below every transport: the cap per peer address, the time bounds on request
 * bodies (idle, and Node's request timeout answered as problem details), and the drain that ends a replica without
 * resetting a request. Used by the composition root (server.ts) only.
 */
export { CONNECTIONS_CHECK_MS, watchBody } from './bodyTimeouts.js';
export { answerUnreadableRequest } from './clientErrors.js';
export { connectionTable, type Connection, type ConnectionTable } from './connectionTable.js';
export { drainConnections, type DrainOutcome } from './drain.js';
export { expressPrototypes } from './expressPrototypes.js';
