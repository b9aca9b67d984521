import express, { type Request, type Response } from 'express';
import { orderEtag } from '../../domain/etags.js';
import type { Order, OrderItem } from '../../domain/model.js';
import type { Services } from '../../domain/services.js';
import { IDEMPOTENCY_KEY_RULE, isValidIdempotencyKey } from '../../domain/idempotencyKey.js';
import { jsonBodyParser } from '../middleware/index.js';
import { sendProblem } from '../problems/index.js';
import { parseCreateBody, parseOrderPatch, parseReplaceBody } from './bodies.js';
import { ifNoneMatchMatches, parseEtagList } from '../middleware/index.js';
import { methodNotAllowed, optionalIfMatch, requiredIfMatch, requireType } from './requestChecks.js';
import { orderJson } from './representation.js';
import { ListQueryError, listQueryErrorOf, pageLinks, parseListQuery } from './orderListQuery.js';

const JSON_TYPE = 'application/json';
const MERGE_PATCH = 'application/merge-patch+json';
/** A merge patch (RFC 7396) may also come as plain JSON, as GitHub's API takes it: generated clients send that. */
const PATCH_TYPES = [MERGE_PATCH, JSON_TYPE] as const;
/** Per-user data: a private cache may keep it but must revalidate; no shared cache may store it. */
const PRIVATE_REVALIDATE = 'private, no-cache';

/** A create, or its replay: the order as first created, so a replay repeats the first answer byte for byte. */
function sendCreated(res: Response, order: Order, items: readonly OrderItem[], replayed: boolean) {
  res
    .status(201)
    .set({
      Location: `/v1/orders/${order.id}`,
      ETag: orderEtag(order),
      'Cache-Control': 'no-store',
      'Content-Type': `${JSON_TYPE}; charset=utf-8`,
      ...(replayed ? { 'Idempotent-Replayed': 'true' } : {}),
    })
    .send(JSON.stringify(orderJson(order, items)));
}

function sendOrder(res: Response, status: number, order: Order, items: readonly OrderItem[], cache = 'no-store') {
  res
    .status(status)
    .set({ ETag: orderEtag(order), 'Cache-Control': cache, Vary: 'Authorization' })
    .type(JSON_TYPE)
    .send(JSON.stringify(orderJson(order, items)));
}

export function ordersRouter(services: Services): express.Router {
  const orders = services.orders;
  const router = express.Router();
  const jsonBody = jsonBodyParser({ limit: '64kb', type: [JSON_TYPE, MERGE_PATCH], strict: false });

  router
    .route('/orders')
    .get(async (req: Request, res: Response) => {
      let page;
      try {
        page = await orders.connection(res.locals.principal, parseListQuery(req.query));
      } catch (error) {
        const refused = error instanceof ListQueryError ? error : listQueryErrorOf(error);
        if (!refused) throw error;
        return sendProblem(req, res, 'MALFORMED_REQUEST', refused.message, { invalid: refused.invalid });
      }
      const links = pageLinks('/v1/orders', req.query, page);
      if (links) res.set('Link', links);
      const listed = await orders.withItems(page.orders);
      res
        .set({ 'Cache-Control': PRIVATE_REVALIDATE, Vary: 'Authorization' })
        .type(JSON_TYPE)
        .send(
          JSON.stringify({
            orders: listed.map((o) => orderJson(o.order, o.items)),
            next_cursor: page.pageInfo.hasNextPage ? page.pageInfo.endCursor : null,
          }),
        );
    })
    .post(
      (req, res, next) => (requireType(req, res, [JSON_TYPE], 'Accept-Post') ? next() : undefined),
      jsonBody,
      async (req: Request, res: Response) => {
        const key = req.get('Idempotency-Key');
        if (key === undefined || !isValidIdempotencyKey(key)) {
          return sendProblem(
            req,
            res,
            'IDEMPOTENCY_KEY_REQUIRED',
            `Send an Idempotency-Key header of ${IDEMPOTENCY_KEY_RULE}, unique per order.`,
          );
        }
        const input = parseCreateBody(req.body);
        const result = await orders.create(res.locals.principal, input, { idempotencyKey: key });
        sendCreated(res, result.order, result.items, result.replayed);
      },
    )
    .all(methodNotAllowed('GET, HEAD, POST'));

  router
    .route('/orders/:id')
    .get(async (req: Request, res: Response) => {
      const found = await orders.getWithItems(res.locals.principal, String(req.params.id));
      if (!found) return sendProblem(req, res, 'NOT_FOUND', 'Order was not found.');
      const etag = orderEtag(found.order);
      const ifNoneMatch = req.get('If-None-Match');
      const list = ifNoneMatch === undefined ? null : parseEtagList(ifNoneMatch);
      if (list && ifNoneMatchMatches(list, etag)) {
        res.status(304).set({ ETag: etag, 'Cache-Control': PRIVATE_REVALIDATE, Vary: 'Authorization' }).end();
        return;
      }
      sendOrder(res, 200, found.order, found.items, PRIVATE_REVALIDATE);
    })
    .patch(
      (req, res, next) => (requireType(req, res, PATCH_TYPES, 'Accept-Patch') ? next() : undefined),
      jsonBody,
      async (req: Request, res: Response) => {
        const condition = requiredIfMatch(req, res, 'order');
        if (!condition) return;
        const patch = parseOrderPatch(req.body);
        const { order, items } = await orders.patch(res.locals.principal, String(req.params.id), patch, condition);
        sendOrder(res, 200, order, items);
      },
    )
    .put(
      (req, res, next) => (requireType(req, res, [JSON_TYPE], 'Accept') ? next() : undefined),
      jsonBody,
      async (req: Request, res: Response) => {
        const condition = requiredIfMatch(req, res, 'order');
        if (!condition) return;
        const lines = parseReplaceBody(req.body);
        const { order, items } = await orders.replaceItems(
          res.locals.principal,
          String(req.params.id),
          lines,
          condition,
        );
        sendOrder(res, 200, order, items);
      },
    )
    .delete(async (req: Request, res: Response) => {
      const condition = optionalIfMatch(req, res);
      if (!condition) return;
      await orders.remove(res.locals.principal, String(req.params.id), condition);
      res.status(204).set('Cache-Control', 'no-store').end();
    })
    .all(methodNotAllowed('GET, HEAD, PATCH, PUT, DELETE'));

  return router;
}
