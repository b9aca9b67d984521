/**
 * Errors, for every transport: the one catalogue of codes (REST problem types and GraphQL `extensions.code`), and
 * the translators that turn a failure into a problem-details answer or a GraphQL error. Nothing else decides a
 * status code. Imports nothing from the rest of http/.
 */
export {
  PROBLEM_TYPES,
  isApiErrorCode,
  problemBody,
  problemTypeUri,
  type ApiErrorCode,
  type ProblemType,
} from './catalogue.js';
export { bearerChallenge, dpopChallenge, stepUpChallenge } from './challenges.js';
export { clientError, codeOf, formatError, formatResult, isUnexpected, type ErrorPolicy } from './graphqlErrors.js';
export {
  GRAPHQL_RESPONSE_TYPE,
  JSON_TYPE,
  mediaTypeFor,
  requestErrorStatus,
  responseMediaType,
  sendGraphqlError,
  writeAnswer,
  sendLibraryRefusal,
  type GraphqlMediaType,
} from './graphqlResponse.js';
export { lastResort, routeNotFound } from './lastResort.js';
export { problemPage, problemPages, sendProblem } from './problemDetails.js';
export { restProblems, sendDomainProblem } from './translateDomainErrors.js';
export { rawProblem, sendEarlyProblem } from './serverAnswers.js';
export { isUnavailable, RETRY_LATER, UNAVAILABLE_STATUS } from './unavailable.js';
export {
  CODING_REFUSED,
  READABLE_CONTENT_CODINGS,
  refuseUnreadableGraphql,
  sendUnreadableProblem,
  unreadableRequest,
} from './unreadableRequests.js';
export {
  ScimError,
  scimErrorBody,
  scimErrors,
  sendScimError,
  SCIM_ERROR_SCHEMA,
  SCIM_FAILURES,
  SCIM_MEDIA_TYPE,
  type ScimFailure,
} from './scimErrors.js';
