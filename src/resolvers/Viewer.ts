import type { ViewerResolvers } from '../generated/graphql.js';

export const Viewer: ViewerResolvers = {
  id: (user) => user.subject,
  roles: (user) => [...user.roles].sort(),
  scopes: (user) => [...user.scopes].sort(),
  customer: (_user, _args, { services, principal, loaders }) => services.customers.of(principal, loaders),
};
