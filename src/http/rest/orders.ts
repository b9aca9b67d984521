import express, { type Request, type Response } from 'express';
import { orderEtag } from '../../domain/etags.js';
import type { Order, OrderItem } from '../../domain/model.js';
import type { WriteOptions } from '../../domain/orderService.js';
import type { Services } from '../../domain/services.js';
import { IDEMPOTENCY_KEY_RULE, isValidIdempotencyKey } from '../../domain/idempotencyKey.js';
import { jsonBodyParser, readableCoding } from '../middleware/index.js';
import { CODING_REFUSED, sendProblem } from '../problems/index.js';
import { parseCreateBody, parseOrderPatch, parseReplaceBody } from './bodies.js';
import { ifNoneMatchMatches, parseEtagList } from '../middleware/index.js';
import { decodeCursor, encodeCursor, orderJson } from './representation.js';

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

/**
 * The body must have been sent as one of `types`, in a content coding this server reads; otherwise 415, naming the
 * media types accepted (and, for a coding, the codings read: RFC 9110 §15.5.16).
 */
function requireType(
  req: Request,
  res: Response,
  types: readonly string[],
  acceptHeader: 'Accept-Patch' | 'Accept-Post' | 'Accept',
) {
  const accepted = { [acceptHeader]: types.join(', ') };
  if (!req.is([...types])) {
    sendProblem(req, res, 'UNSUPPORTED_MEDIA_TYPE', `Send the body as ${types.join(' or ')}.`, { headers: accepted });
    return false;
  }
  if (!readableCoding(req.headers['content-encoding'])) {
    sendProblem(req, res, 'UNSUPPORTED_MEDIA_TYPE', CODING_REFUSED.detail, {
      headers: { ...accepted, ...CODING_REFUSED.headers },
    });
    return false;
  }
  return true;
}

/**
 * Writes to an existing order must say which version they change (RFC 6585 §3: 428 when not),
 * so that they cannot overwrite a change the client has not seen. Returns undefined after answering.
 */
function requiredIfMatch(req: Request, res: Response): WriteOptions | undefined {
  const header = req.get('If-Match');
  if (header === undefined) {
    sendProblem(req, res, 'PRECONDITION_REQUIRED', 'Send If-Match with the ETag of the order as you last read it.');
    return undefined;
  }
  return writeConditions(req, res, header);
}

/**
 * The request's conditions on the order: If-Match, and If-None-Match, which a server must evaluate before any method
 * (RFC 9110 §13.1.2) — on a write to an order that exists, `*` or its current tag fails with 412.
 */
function writeConditions(req: Request, res: Response, header = req.get('If-Match')): WriteOptions | undefined {
  const ifMatch = header === undefined ? undefined : parseEtagList(header);
  if (ifMatch === null) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'If-Match must be * or a list of quoted entity tags.');
    return undefined;
  }
  const noneHeader = req.get('If-None-Match');
  const ifNoneMatch = noneHeader === undefined ? undefined : parseEtagList(noneHeader);
  if (ifNoneMatch === null) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'If-None-Match must be * or a list of quoted entity tags.');
    return undefined;
  }
  if (ifMatch === undefined && ifNoneMatch === undefined) return {};
  return {
    precondition: {
      ...(ifMatch === undefined ? {} : { ifMatch }),
      ...(ifNoneMatch === undefined ? {} : { ifNoneMatch }),
    },
  };
}

function methodNotAllowed(allow: string) {
  return (req: Request, res: Response) => {
    if (req.method === 'OPTIONS') {
      res.set('Allow', allow).status(204).end();
      return;
    }
    sendProblem(req, res, 'METHOD_NOT_ALLOWED', `${req.method} is not supported here.`, { headers: { Allow: allow } });
  };
}

export function ordersRouter(services: Services): express.Router {
  const orders = services.orders;
  const router = express.Router();
  const jsonBody = jsonBodyParser({ limit: '64kb', type: [JSON_TYPE, MERGE_PATCH], strict: false });

  router
    .route('/orders')
    .get(async (req: Request, res: Response) => {
      const { limit: limitParam, cursor: cursorParam } = req.query;
      // Plain decimal digits only: Number() would also take "0x10", "1e2" and " 5".
      const digits = typeof limitParam === 'string' && /^\d{1,20}$/.test(limitParam);
      const limit = limitParam === undefined ? undefined : digits ? Number(limitParam) : NaN;
      if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1)) {
        return sendProblem(req, res, 'MALFORMED_REQUEST', 'limit must be a whole number from 1 to 100.');
      }
      const after = typeof cursorParam === 'string' ? decodeCursor(cursorParam) : undefined;
      if (cursorParam !== undefined && !after) {
        return sendProblem(req, res, 'MALFORMED_REQUEST', 'cursor is not one this API issued.');
      }
      const page = await orders.list(res.locals.principal, { first: limit, ...(after ? { after } : {}) });
      const last = page.orders.at(-1);
      const next = page.hasMore && last ? encodeCursor(last) : null;
      if (next) res.set('Link', `</v1/orders?limit=${page.limit}&cursor=${next}>; rel="next"`);
      const listed = await orders.withItems(page.orders);
      res
        .set({ 'Cache-Control': PRIVATE_REVALIDATE, Vary: 'Authorization' })
        .type(JSON_TYPE)
        .send(JSON.stringify({ orders: listed.map((o) => orderJson(o.order, o.items)), next_cursor: next }));
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
        const condition = requiredIfMatch(req, res);
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
        const condition = requiredIfMatch(req, res);
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
      const condition = writeConditions(req, res);
      if (!condition) return;
      await orders.remove(res.locals.principal, String(req.params.id), condition);
      res.status(204).set('Cache-Control', 'no-store').end();
    })
    .all(methodNotAllowed('GET, HEAD, PATCH, PUT, DELETE'));

  return router;
}
