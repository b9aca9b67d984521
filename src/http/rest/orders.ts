import express, { type NextFunction, type Request, type Response } from 'express';
import { DomainError, preconditionFailed } from '../../domain/errors.js';
import { orderEtag } from '../../domain/etags.js';
import { isValidIdempotencyKey, PAGE, type WriteOptions } from '../../domain/orderService.js';
import type { Order, OrderItem } from '../../domain/orders.js';
import type { Services } from '../../domain/services.js';
import { sendProblem } from '../problems.js';
import { parseCreateBody, parseOrderPatch, parseReplaceBody } from './bodies.js';
import { ifMatchSatisfied, ifNoneMatchMatches, parseEtagList } from './conditional.js';
import { decodeCursor, encodeCursor, orderJson } from './representation.js';

const JSON_TYPE = 'application/json';
const MERGE_PATCH = 'application/merge-patch+json';
/** A merge patch (RFC 7396) may also come as plain JSON, as GitHub's API takes it: generated clients send that. */
const PATCH_TYPES = [MERGE_PATCH, JSON_TYPE] as const;
/** Per-user data: a private cache may keep it but must revalidate; no shared cache may store it. */
const PRIVATE_REVALIDATE = 'private, no-cache';

/** What a create answered, stored with the idempotency key and replayed byte for byte. */
interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

type Handler = (req: Request, res: Response) => Promise<void>;
const handle = (fn: Handler) => (req: Request, res: Response, next: NextFunction) => fn(req, res).catch(next);

function send(res: Response, stored: StoredResponse, extra: Record<string, string> = {}) {
  res
    .status(stored.status)
    .set({ ...stored.headers, ...extra })
    .send(stored.body);
}

function created(order: Order, items: readonly OrderItem[]): StoredResponse {
  return {
    status: 201,
    headers: {
      Location: `/v1/orders/${order.id}`,
      ETag: orderEtag(order),
      'Cache-Control': 'no-store',
      'Content-Type': `${JSON_TYPE}; charset=utf-8`,
    },
    body: JSON.stringify(orderJson(order, items)),
  };
}

function sendOrder(res: Response, status: number, order: Order, items: readonly OrderItem[], cache = 'no-store') {
  res
    .status(status)
    .set({ ETag: orderEtag(order), 'Cache-Control': cache, Vary: 'Authorization' })
    .type(JSON_TYPE)
    .send(JSON.stringify(orderJson(order, items)));
}

/** The body must have been sent as one of `types`; otherwise 415, naming what is accepted. */
function requireType(
  req: Request,
  res: Response,
  types: readonly string[],
  acceptHeader: 'Accept-Patch' | 'Accept-Post' | 'Accept',
) {
  if (req.is([...types])) return true;
  sendProblem(req, res, 'UNSUPPORTED_MEDIA_TYPE', `Send the body as ${types.join(' or ')}.`, {
    headers: { [acceptHeader]: types.join(', ') },
  });
  return false;
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
  return optionalIfMatch(req, res, header);
}

function optionalIfMatch(req: Request, res: Response, header = req.get('If-Match')): WriteOptions | undefined {
  if (header === undefined) return {};
  const list = parseEtagList(header);
  if (!list) {
    sendProblem(req, res, 'MALFORMED_REQUEST', 'If-Match must be * or a list of quoted entity tags.');
    return undefined;
  }
  return { precondition: (order) => ifMatchSatisfied(list, orderEtag(order)) };
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
  const jsonBody = express.json({ limit: '64kb', type: [JSON_TYPE, MERGE_PATCH], strict: false });

  router
    .route('/orders')
    .get(
      handle(async (req, res) => {
        const { limit: limitParam, cursor: cursorParam } = req.query;
        // Plain decimal digits only: Number() would also take "0x10", "1e2" and " 5".
        const digits = typeof limitParam === 'string' && /^\d{1,20}$/.test(limitParam);
        const limit = limitParam === undefined ? PAGE.default : digits ? Number(limitParam) : NaN;
        if (!Number.isInteger(limit) || limit < 1) {
          return sendProblem(req, res, 'MALFORMED_REQUEST', 'limit must be a whole number from 1 to 100.');
        }
        const after = typeof cursorParam === 'string' ? decodeCursor(cursorParam) : undefined;
        if (cursorParam !== undefined && !after) {
          return sendProblem(req, res, 'MALFORMED_REQUEST', 'cursor is not one this API issued.');
        }
        const page = await orders.page(res.locals.principal, { limit, ...(after ? { after } : {}) });
        const pageSize = Math.min(limit, PAGE.max);
        const last = page.orders.at(-1);
        const next = page.hasMore && last ? encodeCursor(last.order) : null;
        if (next) res.set('Link', `</v1/orders?limit=${pageSize}&cursor=${next}>; rel="next"`);
        res
          .set({ 'Cache-Control': PRIVATE_REVALIDATE, Vary: 'Authorization' })
          .type(JSON_TYPE)
          .send(JSON.stringify({ orders: page.orders.map((o) => orderJson(o.order, o.items)), next_cursor: next }));
      }),
    )
    .post(
      (req, res, next) => (requireType(req, res, [JSON_TYPE], 'Accept-Post') ? next() : undefined),
      jsonBody,
      handle(async (req, res) => {
        const key = req.get('Idempotency-Key');
        if (key === undefined || !isValidIdempotencyKey(key)) {
          return sendProblem(
            req,
            res,
            'IDEMPOTENCY_KEY_REQUIRED',
            'Send an Idempotency-Key header of 1 to 255 visible ASCII characters, unique per order.',
          );
        }
        const input = parseCreateBody(req.body);
        const result = await orders.create(res.locals.principal, input, {
          idempotencyKey: key,
          response: ({ order, items }) => created(order, items),
        });
        if (!result.replayed) return send(res, result.response as StoredResponse);
        if (result.response) return send(res, result.response as StoredResponse, { 'Idempotent-Replayed': 'true' });
        // The key was first used through GraphQL, which keeps no HTTP response: answer from the order.
        if (!result.order) throw new DomainError('NOT_FOUND', 'The order created with this key no longer exists.');
        send(res, created(result.order, await orders.itemsOf(result.order)), { 'Idempotent-Replayed': 'true' });
      }),
    )
    .all(methodNotAllowed('GET, HEAD, POST'));

  router
    .route('/orders/:id')
    .get(
      handle(async (req, res) => {
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
      }),
    )
    .patch(
      (req, res, next) => (requireType(req, res, PATCH_TYPES, 'Accept-Patch') ? next() : undefined),
      jsonBody,
      handle(async (req, res) => {
        const condition = requiredIfMatch(req, res);
        if (!condition) return;
        const patch = parseOrderPatch(req.body);
        const id = String(req.params.id);
        if (patch.status === undefined) {
          // An empty patch changes nothing, but its precondition still holds or fails.
          const found = await orders.getWithItems(res.locals.principal, id);
          if (!found) return sendProblem(req, res, 'NOT_FOUND', 'Order was not found.');
          if (condition.precondition && !condition.precondition(found.order)) throw preconditionFailed();
          return sendOrder(res, 200, found.order, found.items);
        }
        const order = await orders.changeStatus(res.locals.principal, id, patch.status, condition);
        sendOrder(res, 200, order, await orders.itemsOf(order));
      }),
    )
    .put(
      (req, res, next) => (requireType(req, res, [JSON_TYPE], 'Accept') ? next() : undefined),
      jsonBody,
      handle(async (req, res) => {
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
      }),
    )
    .delete(
      handle(async (req, res) => {
        const condition = optionalIfMatch(req, res);
        if (!condition) return;
        await orders.remove(res.locals.principal, String(req.params.id), condition);
        res.status(204).set('Cache-Control', 'no-store').end();
      }),
    )
    .all(methodNotAllowed('GET, HEAD, PATCH, PUT, DELETE'));

  return router;
}
