import express, { type Request, type Response } from 'express';
import { entityTag } from '../../domain/etags.js';
import { WEBHOOK_ENDPOINT_ID, WEBHOOK_MESSAGE_ID } from '../../domain/ids.js';
import type { Services } from '../../domain/services.js';
import type { WebhookDelivery, WebhookEndpoint } from '../../domain/webhooks.js';
import { jsonBodyParser } from '../middleware/index.js';
import { sendProblem } from '../problems/index.js';
import { parseWebhookEndpointBody, parseWebhookEndpointPatch } from './bodies.js';
import { decodeWebhookCursor, encodeCursor, webhookDeliveryJson, webhookEndpointJson } from './representation.js';
import { limitParam, methodNotAllowed, optionalIfMatch, requiredIfMatch, requireType } from './requestChecks.js';

const JSON_TYPE = 'application/json';
const MERGE_PATCH = 'application/merge-patch+json';
const PATCH_TYPES = [MERGE_PATCH, JSON_TYPE] as const;
const PRIVATE_REVALIDATE = 'private, no-cache';
const BASE = '/webhook-endpoints';

function sendJson(res: Response, status: number, body: unknown, headers: Record<string, string>) {
  res.status(status).set(headers).type(JSON_TYPE).send(JSON.stringify(body));
}

/** The endpoint with the secret just made: never stored by caches. */
function sendWithSecret(res: Response, status: number, endpoint: WebhookEndpoint, secret: string) {
  sendJson(
    res,
    status,
    { ...webhookEndpointJson(endpoint), secret },
    {
      ETag: entityTag(endpoint),
      'Cache-Control': 'no-store',
      ...(status === 201 ? { Location: `/v1${BASE}/${endpoint.id}` } : {}),
    },
  );
}

function sendEndpoint(res: Response, endpoint: WebhookEndpoint, cache = 'no-store') {
  sendJson(res, 200, webhookEndpointJson(endpoint), {
    ETag: entityTag(endpoint),
    'Cache-Control': cache,
    Vary: 'Authorization',
  });
}

function sendDelivery(res: Response, delivery: WebhookDelivery) {
  sendJson(res, 202, webhookDeliveryJson(delivery), { 'Cache-Control': 'no-store' });
}

/** `limit` and `cursor` of a list, or undefined after answering 400. */
function pageParams(req: Request, res: Response, idPattern: RegExp) {
  const limit = limitParam(req.query.limit);
  if (Number.isNaN(limit)) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'limit must be a whole number from 1 to 100.');
    return undefined;
  }
  const cursor = req.query.cursor;
  const after = typeof cursor === 'string' ? decodeWebhookCursor(cursor, idPattern) : undefined;
  if (cursor !== undefined && !after) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'cursor is not one this API issued.');
    return undefined;
  }
  return { first: limit, ...(after ? { after } : {}) };
}

/** Webhook endpoints: thin over the domain's one use case per operation, which GraphQL's resolvers share. */
export function webhookEndpointsRouter(services: Services): express.Router {
  const webhooks = services.webhooks;
  const router = express.Router();
  const jsonBody = jsonBodyParser({ limit: '64kb', type: [JSON_TYPE, MERGE_PATCH], strict: false });
  const id = (req: Request) => String(req.params.id);

  router
    .route(BASE)
    .get(async (req: Request, res: Response) => {
      const params = pageParams(req, res, WEBHOOK_ENDPOINT_ID);
      if (!params) return;
      const page = await webhooks.list(res.locals.principal, params);
      const last = page.items.at(-1);
      const next = page.hasMore && last ? encodeCursor(last) : null;
      if (next) res.set('Link', `</v1${BASE}?limit=${page.limit}&cursor=${next}>; rel="next"`);
      sendJson(
        res,
        200,
        { webhook_endpoints: page.items.map(webhookEndpointJson), next_cursor: next },
        { 'Cache-Control': PRIVATE_REVALIDATE, Vary: 'Authorization' },
      );
    })
    .post(
      (req, res, next) => (requireType(req, res, [JSON_TYPE], 'Accept-Post') ? next() : undefined),
      jsonBody,
      async (req: Request, res: Response) => {
        const created = await webhooks.create(res.locals.principal, parseWebhookEndpointBody(req.body));
        sendWithSecret(res, 201, created.endpoint, created.secret);
      },
    )
    .all(methodNotAllowed('GET, HEAD, POST'));

  router
    .route(`${BASE}/:id`)
    .get(async (req: Request, res: Response) => {
      const endpoint = await webhooks.get(res.locals.principal, id(req));
      if (!endpoint) return sendProblem(req, res, 'NOT_FOUND', 'Webhook endpoint was not found.');
      sendEndpoint(res, endpoint, PRIVATE_REVALIDATE);
    })
    .patch(
      (req, res, next) => (requireType(req, res, PATCH_TYPES, 'Accept-Patch') ? next() : undefined),
      jsonBody,
      async (req: Request, res: Response) => {
        const condition = requiredIfMatch(req, res, 'webhook endpoint');
        if (!condition) return;
        const patch = parseWebhookEndpointPatch(req.body);
        sendEndpoint(res, await webhooks.patch(res.locals.principal, id(req), patch, condition.precondition));
      },
    )
    .delete(async (req: Request, res: Response) => {
      const condition = optionalIfMatch(req, res);
      if (!condition) return;
      await webhooks.remove(res.locals.principal, id(req), condition.precondition);
      res.status(204).set('Cache-Control', 'no-store').end();
    })
    .all(methodNotAllowed('GET, HEAD, PATCH, DELETE'));

  router
    .route(`${BASE}/:id/rotate-secret`)
    .post(async (req: Request, res: Response) => {
      const condition = optionalIfMatch(req, res);
      if (!condition) return;
      const rotated = await webhooks.rotateSecret(res.locals.principal, id(req), condition.precondition);
      sendWithSecret(res, 200, rotated.endpoint, rotated.secret);
    })
    .all(methodNotAllowed('POST'));

  router
    .route(`${BASE}/:id/deliveries`)
    .get(async (req: Request, res: Response) => {
      const params = pageParams(req, res, WEBHOOK_MESSAGE_ID);
      if (!params) return;
      const page = await webhooks.deliveries(res.locals.principal, id(req), params);
      const last = page.items.at(-1);
      const next = page.hasMore && last ? encodeCursor(last) : null;
      if (next) res.set('Link', `</v1${BASE}/${id(req)}/deliveries?limit=${page.limit}&cursor=${next}>; rel="next"`);
      sendJson(
        res,
        200,
        { deliveries: page.items.map(webhookDeliveryJson), next_cursor: next },
        { 'Cache-Control': PRIVATE_REVALIDATE, Vary: 'Authorization' },
      );
    })
    .all(methodNotAllowed('GET, HEAD'));

  router
    .route(`${BASE}/:id/deliveries/:deliveryId/retry`)
    .post(async (req: Request, res: Response) => {
      sendDelivery(res, await webhooks.retry(res.locals.principal, id(req), String(req.params.deliveryId)));
    })
    .all(methodNotAllowed('POST'));

  router
    .route(`${BASE}/:id/ping`)
    .post(async (req: Request, res: Response) => {
      sendDelivery(res, await webhooks.ping(res.locals.principal, id(req)));
    })
    .all(methodNotAllowed('POST'));

  return router;
}
