import express from 'express';
import type { Authentication } from '../../auth/credentials.js';
import type { Services } from '../../domain/services.js';
import { authenticate, problemAuthFailure, type RateBudget } from '../middleware/index.js';
import { restProblems } from '../problems/index.js';
import { requireAcceptableJson } from './negotiation.js';
import { openapiDocument } from './openapi.js';
import { ordersRouter } from './orders.js';
import { chargeRestRequests } from './rateLimit.js';
import { webhookEndpointsRouter } from './webhookEndpoints.js';

export { openapiDocument } from './openapi.js';
export { orderJson } from './representation.js';
export { REST_PRICES } from './rateLimit.js';

/** Resource endpoints at /v1: access tokens on every request (Bearer or DPoP), no server-side session. */
export function createRestRouter(deps: {
  services: Services;
  /** Access tokens only: a session cookie authenticates nothing here. */
  auth: Authentication;
  budget: RateBudget;
}): express.Router {
  const router = express.Router();
  // Free and without RateLimit fields: the document is public and shared caches may serve it to anyone.
  router.get('/openapi.json', (_req, res) => {
    res.set('Cache-Control', 'public, max-age=300').json(openapiDocument);
  });
  router.use(authenticate(deps.auth, problemAuthFailure));
  router.use(chargeRestRequests(deps.budget));
  router.use(requireAcceptableJson);
  router.use(ordersRouter(deps.services));
  router.use(webhookEndpointsRouter(deps.services));
  router.use(restProblems('64 kB'));
  return router;
}
