import type { Logger } from 'pino';
import type { Loaders } from './domain/loaders.js';
import type { Principal } from './domain/policy.js';
import type { Services } from './domain/services.js';

/** What every resolver gets, built afresh for each request. */
export interface Context {
  readonly principal: Principal;
  readonly services: Services;
  readonly loaders: Loaders;
  readonly requestId: string;
  readonly log: Logger;
}

export function createContext(services: Services, principal: Principal, requestId: string, log: Logger): Context {
  return { principal, services, loaders: services.loaders(), requestId, log };
}
