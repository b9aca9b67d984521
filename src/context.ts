import type { Logger } from 'pino';
import type { Loaders } from './domain/loaders.js';
import type { OrderEvent } from './domain/model.js';
import type { Principal } from './domain/policy.js';
import type { Services } from './domain/services.js';
import type { OrderFeed } from './domain/subscriptions.js';

/** How a streaming transport delivers a subscription's events (the one subscribe path, http/realtime/subscribe.ts). */
export interface SubscriberStream {
  /** The feed's events for this subscriber, from now on (or resumed, when the subscriber asked to). */
  events(feed: OrderFeed): AsyncIterableIterator<OrderEvent>;
}

/** What every resolver gets, built afresh for each request. */
export interface Context {
  readonly principal: Principal;
  readonly services: Services;
  /** Per request; a subscription swaps in fresh ones for every event it delivers. */
  loaders: Loaders;
  /** Set by the streaming transports (WebSocket, SSE): where a subscription's events go. */
  readonly stream?: SubscriberStream;
  /** The outbox id of the event a subscription is delivering now, sent as `extensions.eventId`. */
  eventId?: string;
  readonly requestId: string;
  readonly log: Logger;
}

const LOADERS = Symbol('loaders');
const LOG = Symbol('log');

/**
 * The loaders and the logger are made on first use: most requests never log, and a subscription served by a shared
 * execution never reads its own loaders. They are getters on the prototype, not on the object, because Apollo
 * copies each request's context (own properties only, prototype kept) before it runs the operation: own getters
 * would be called by that copy, making both for every request.
 */
class RequestContext implements Context {
  [LOADERS]: Loaders | undefined = undefined;
  [LOG]: Logger | (() => Logger);
  declare readonly stream?: SubscriberStream;
  declare eventId?: string;

  constructor(
    readonly services: Services,
    readonly principal: Principal,
    readonly requestId: string,
    log: Logger | (() => Logger),
    stream: SubscriberStream | undefined,
  ) {
    this[LOG] = log;
    if (stream) this.stream = stream;
  }

  get loaders(): Loaders {
    return (this[LOADERS] ??= this.services.loaders());
  }

  set loaders(fresh: Loaders) {
    this[LOADERS] = fresh;
  }

  get log(): Logger {
    const log = this[LOG];
    return typeof log === 'function' ? (this[LOG] = log()) : log;
  }
}

/** `log` may be given as a function that makes the logger, called once, when something first logs. */
export function createContext(
  services: Services,
  principal: Principal,
  requestId: string,
  log: Logger | (() => Logger),
  stream?: SubscriberStream,
): Context {
  return new RequestContext(services, principal, requestId, log, stream);
}

/** A copy for one run of an operation, as Apollo makes one: what it sets on itself stays off the original. */
export function copyContext(context: Context): Context {
  return Object.assign(Object.create(Object.getPrototypeOf(context) as object) as Context, context);
}
