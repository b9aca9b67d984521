/**
 * The one GraphQL pipeline under every transport (Apollo on HTTP, graphql-ws, graphql-sse): request parameters,
 * persisted and trusted documents, parse options, validation rules and static limits, cost and the rate budget,
 * cache policy, deprecation counts, the graphql-jit executor, error formatting and masking. Built once and handed to
 * each transport; it knows neither Express nor WebSocket.
 */
export { cacheControlHeader, derivePolicy, policyIfCacheable, type CachePolicy, type Scope } from './cachePolicy.js';
export { operationCost } from './cost.js';
export { createJitExecutor, type JitOptions } from './jitExecutor.js';
export { limitErrors, type StaticLimits } from './limits.js';
export { nameOperation, OPERATION_SPAN, withResolverSpans } from './operationSpans.js';
export { sha256 } from './persistedDocuments.js';
export {
  isRefusal,
  operationIn,
  type PreparedDocument,
  type PreparedDocuments,
  type PreparedOperation,
  type Refusal,
} from './prepared.js';
export { createPipeline, pointsFor, type Admission, type CostReport, type Pipeline } from './pipeline.js';
export {
  isRecord,
  namedHash,
  NO_PARAMS,
  paramsOfBody,
  paramsOfQuery,
  type GraphqlParams,
  type OperationParams,
} from './requestParams.js';
