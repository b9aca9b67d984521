import type { Logger } from 'pino';
import type { User } from '../domain/policy.js';

/**
 * A token verifier that also tells the webhooks whom it verified: an endpoint receives what its owner may read as of
 * the owner's newest credential (docs/webhooks.md), so each newer token's roles are noted before the request goes on.
 * A note that fails is logged and left to the next request: it never refuses the caller.
 */
export function notingOwnerRoles<V extends { verify(token: string, ...rest: never[]): Promise<User> }>(
  verifier: V,
  webhooks: { ownerSeen(user: User): Promise<void> },
  logger: Logger,
): V {
  return {
    ...verifier,
    verify: (token: string, ...rest: never[]) =>
      verifier.verify(token, ...rest).then(async (user) => {
        await webhooks.ownerSeen(user).catch((err: unknown) => {
          logger.warn({ event: 'webhooks.owner_roles_not_noted', err }, "a webhook owner's roles were not noted");
        });
        return user;
      }),
  };
}
