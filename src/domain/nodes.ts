import type { CustomerService } from './customers.js';
import { invalidInput } from './errors.js';
import { ID_PATTERN, WEBHOOK_ENDPOINT_ID } from './ids.js';
import type { Loaders } from './loaders.js';
import type { Customer, Order } from './model.js';
import { isStaff, requireScope, SCOPES, type Principal } from './policy.js';
import type { WebhookEndpoint } from './webhooks.js';

/** `nodes(ids:)` answers at most this many ids, like a connection's page. */
export const MAX_NODES = 100;

export type NodeModel = Order | Customer | WebhookEndpoint;

/**
 * Global object identification (Relay's `node`): an id's prefix names its type, and each is read as that type's own
 * query reads it, so whatever is not the caller's is null. Orders and customers are batched through the request's
 * loaders.
 */
export function createNodes(deps: {
  customers: CustomerService;
  webhookEndpoint: (principal: Principal, id: string) => Promise<WebhookEndpoint | null>;
}) {
  const { customers, webhookEndpoint } = deps;

  async function many(principal: Principal, ids: readonly string[], loaders: Loaders): Promise<(NodeModel | null)[]> {
    const user = requireScope(principal, SCOPES.read);
    if (ids.length > MAX_NODES) {
      throw invalidInput([
        { pointer: '/ids', reason: `at most ${MAX_NODES} ids; ask for the rest in another request` },
      ]);
    }
    const own = isStaff(user) ? undefined : await customers.idFor(user);
    return Promise.all(
      ids.map(async (id): Promise<NodeModel | null> => {
        if (WEBHOOK_ENDPOINT_ID.test(id)) return webhookEndpoint(principal, id);
        if (!ID_PATTERN.test(id)) return null;
        if (id.startsWith('cus_')) return own === undefined || id === own ? loaders.customer.load(id) : null;
        const order = await loaders.order.load(id);
        return order && (own === undefined || order.customerId === own) ? order : null;
      }),
    );
  }

  return {
    many,
    async one(principal: Principal, id: string, loaders: Loaders): Promise<NodeModel | null> {
      return (await many(principal, [id], loaders))[0] ?? null;
    },
  };
}

/** The schema type of a node, from its id's prefix. */
export function nodeType(node: NodeModel): 'Order' | 'Customer' | 'WebhookEndpoint' {
  return node.id.startsWith('ord_') ? 'Order' : node.id.startsWith('cus_') ? 'Customer' : 'WebhookEndpoint';
}
