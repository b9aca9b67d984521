import express, { type NextFunction, type Request, type Response } from 'express';
import type { Authentication } from '../../auth/credentials.js';
import type { Provisioning } from '../../domain/provisioning.js';
import { jsonBodyParser, type RateBudget } from '../middleware/index.js';
import { ScimError, scimErrors, sendScimError } from '../problems/index.js';
import { directoryAuth } from './directoryAuth.js';
import { groupsRouter } from './groups.js';
import { queryValue, send, sendList } from './resources.js';
import { resourceTypeDocuments, schemaDocuments, SCIM_BODY_LIMIT, serviceProviderConfig } from './schemas.js';
import { usersRouter } from './users.js';

/** Requests may be sent as application/scim+json (RFC 7644 §8.1) or application/json. */
const JSON_TYPES = ['application/scim+json', 'application/json'];

/**
 * POST, PUT and PATCH carry a JSON body; GET and DELETE are read without one (Okta sends DELETE with an empty body
 * and a JSON content type, which must not be taken for a malformed one).
 */
function bodies() {
  const parse = jsonBodyParser({ limit: SCIM_BODY_LIMIT, type: JSON_TYPES, utf8Only: true });
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'POST' && req.method !== 'PUT' && req.method !== 'PATCH') return next();
    if (!req.is(JSON_TYPES)) {
      return next(
        new ScimError('unsupportedMediaType', 'Send the body as application/scim+json (or application/json).'),
      );
    }
    parse(req, res, next);
  };
}

/** The discovery endpoints take no filter: RFC 7644 §4 says to refuse one (403) rather than seem to apply it. */
function noFilter(req: Request) {
  if (queryValue(req, 'filter') !== undefined) {
    throw new ScimError('forbidden', 'The discovery endpoints do not support filtering.');
  }
}

/**
 * /scim/v2, for a directory that authenticates (directoryAuth): discovery, /Users and /Groups. Anything else under it
 * is a SCIM 404 or 405; every failure, a thrown one included, is answered in the SCIM error schema.
 */
export function createScimRouter(deps: {
  provisioning: Provisioning;
  /** The externally visible base of the service (PUBLIC_URL), for `meta.location`. */
  publicUrl: string;
  token?: string;
  scope?: string;
  auth: Authentication;
  budget: RateBudget;
}): express.Router {
  const base = `${deps.publicUrl}/scim/v2`;
  const v2 = express.Router({ caseSensitive: false });
  v2.use((_req, res, next) => {
    // Directory data is per organisation and changes with every write: no cache may keep it.
    res.set('Cache-Control', 'no-store');
    next();
  });
  v2.use(directoryAuth(deps));
  v2.use(bodies());

  v2.get('/ServiceProviderConfig', (req, res) => {
    noFilter(req);
    send(res, 200, serviceProviderConfig(base));
  });
  const all = (res: Response, resources: unknown[]) =>
    sendList(res, { totalResults: resources.length, startIndex: 1 }, resources);
  v2.get('/ResourceTypes', (req, res) => {
    noFilter(req);
    all(res, resourceTypeDocuments(base));
  });
  /** One discovery document by its id, in any case. */
  const one = <D extends { id: string }>(documents: D[], id: string, known: string): D => {
    const found = documents.find((d) => d.id.toLowerCase() === id.toLowerCase());
    if (!found) throw new ScimError('notFound', known);
    return found;
  };
  v2.get('/ResourceTypes/:name', (req, res) => {
    send(res, 200, one(resourceTypeDocuments(base), req.params.name!, 'The resource types are User and Group.'));
  });
  v2.get('/Schemas', (req, res) => {
    noFilter(req);
    all(res, schemaDocuments(base));
  });
  v2.get('/Schemas/:urn', (req, res) => {
    send(res, 200, one(schemaDocuments(base), req.params.urn!, 'The schemas are the core User and Group schemas.'));
  });
  v2.use('/Users', usersRouter(deps.provisioning, base));
  v2.use('/Groups', groupsRouter(deps.provisioning, base));
  v2.use(unknownRoute);

  const router = express.Router();
  router.use('/v2', v2);
  router.use(unknownRoute);
  router.use(scimErrors(SCIM_BODY_LIMIT));
  return router;
}

const KNOWN = /^\/(?:v2\/)?(ServiceProviderConfig|ResourceTypes|Schemas|Users|Groups)(\/[^/]+)?\/?$/i;

/** The methods a known path answers (HEAD with every GET, as Express serves it), or null when it names nothing. */
function allowedAt(path: string): string | null {
  const match = KNOWN.exec(path);
  if (!match) return null;
  const [, endpoint, one] = match as unknown as [string, string, string | undefined];
  const resources = /^(users|groups)$/i.test(endpoint);
  if (!resources) return endpoint.toLowerCase() === 'serviceproviderconfig' && one ? null : 'GET, HEAD';
  return one ? 'GET, HEAD, PUT, PATCH, DELETE' : 'GET, HEAD, POST';
}

/** A path under /scim that names nothing: 405 with Allow (RFC 9110 §15.5.6) for a known one, else 404. */
function unknownRoute(req: Request, res: Response) {
  const allow = allowedAt(req.originalUrl.replace(/^\/scim/i, '').split('?')[0]!);
  if (allow !== null) {
    sendScimError(res, 'methodNotAllowed', `${req.method} is not supported here; use ${allow}.`, { Allow: allow });
    return;
  }
  sendScimError(res, 'notFound', 'There is no SCIM endpoint at this path.');
}

/** /scim while provisioning is off (neither SCIM_TOKEN nor SCIM_SCOPE set): 404, in the SCIM error schema. */
export function scimNotConfigured(_req: Request, res: Response) {
  sendScimError(res, 'notFound', 'SCIM provisioning is not enabled on this server.');
}
