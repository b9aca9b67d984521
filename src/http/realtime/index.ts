/**
 * Subscriptions as they happen: the WebSocket server (graphql-ws) and server-sent events (graphql-sse) over one
 * subscribe path, the shared execution of identical subscriptions, and the registry of open streams (per-IP and
 * per-user bounds, the sessions behind them).
 */
export { boundedStream, SUBSCRIBER_BUFFER } from './boundedStream.js';
export { createRealtime } from './realtime.js';
export { createSharedExecution, type SharedExecution } from './sharedExecution.js';
export { textFrame } from './socketMember.js';
export { createSseRouter } from './sse.js';
export { createStreamRegistry, endingStreamsOnRevoke, type StreamRegistry } from './streamRegistry.js';
export { createSubscribePath, type StreamEnd, type SubscribePath, type Subscriber } from './subscribe.js';
export { createWebSocketServer } from './webSocketServer.js';
