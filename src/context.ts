import type { Logger } from 'pino';
import type { Loaders } from './domain/loaders.js';
import type { StreamOptions } from './domain/subscriptions.js';
import type { Principal } from './domain/policy.js';
import type { Services } from './domain/services.js';

/** What every resolver gets, built afresh for each request. */
export interface Context {
  readonly principal: Principal;
  readonly services: Services;
  /** Per request; a subscription swaps in fresh ones for every event it delivers. */
  loaders: Loaders;
  /** Set by streaming transports: how a subscription ends its subscriber. */
  readonly stream?: StreamOptions;
  /** The outbox id of the event a subscription is delivering now, sent as `extensions.eventId`. */
  eventId?: string;
  readonly requestId: string;
  readonly log: Logger;
}

export function createContext(
  services: Services,
  principal: Principal,
  requestId: string,
  log: Logger,
  stream?: StreamOptions,
): Context {
  // Made on first use: a subscription served by a shared execution never reads its own.
  let loaders: Loaders | undefined;
  return {
    principal,
    services,
    get loaders() {
      return (loaders ??= services.loaders());
    },
    set loaders(fresh: Loaders) {
      loaders = fresh;
    },
    requestId,
    log,
    ...(stream ? { stream } : {}),
  };
}
