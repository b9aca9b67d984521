import type { Metrics } from './metrics.js';

interface Budget<C extends { readonly allowed: boolean }> {
  charge(key: string, points: number): Promise<C>;
  close(): Promise<void>;
}

/** A refused charge is a refusal, whichever transport asked (GraphQL cost or a REST price). */
export function countingRefusals<C extends { readonly allowed: boolean }>(
  budget: Budget<C>,
  metrics: Metrics,
): Budget<C> {
  return {
    async charge(key, points) {
      const charge = await budget.charge(key, points);
      if (!charge.allowed) metrics.refusals.inc({ reason: 'rate_budget' });
      return charge;
    },
    close: () => budget.close(),
  };
}

/** A subscription's event stream, counted in `graphql_subscriptions_open` from now until it ends. */
export function countedOpen<T>(stream: AsyncIterableIterator<T>, metrics: Metrics): AsyncIterableIterator<T> {
  metrics.openSubscriptions.inc();
  let open = true;
  const closed = () => {
    if (open) metrics.openSubscriptions.dec();
    open = false;
  };
  const iterator = stream[Symbol.asyncIterator]();
  const counted: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      const step = await iterator.next();
      if (step.done) closed();
      return step;
    },
    async return(value?: unknown) {
      closed();
      return (await iterator.return?.(value)) ?? { done: true, value: undefined };
    },
    async throw(error?: unknown) {
      closed();
      if (iterator.throw) return iterator.throw(error);
      throw error;
    },
  };
  return counted;
}
