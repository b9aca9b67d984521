/**
 * Messages between the fan-out bench (bench/fanout.ts) and its subscriber processes
 * (bench/fanoutClient.ts), over Node's fork IPC channel.
 *
 * Times are milliseconds since `base`, a reading of process.hrtime.bigint() taken by the parent.
 * On Linux that is CLOCK_MONOTONIC, one clock for every process on the machine, so a receive time
 * taken in a subscriber process can be subtracted from a send time taken in the parent.
 */

export type ToClient =
  | {
      readonly type: 'init';
      /** ws://127.0.0.1:<port>/graphql */
      readonly wsUrl: string;
      readonly query: string;
      /** process.hrtime.bigint() of the parent, as a decimal string. */
      readonly base: string;
      readonly perConnection: number;
      /** One access token per connection this process opens, in the order it opens them. */
      readonly tokens: readonly string[];
      /** Per token: 'staff', or the customer it signs in as (who sees only their own orders). */
      readonly audiences: readonly string[];
      /** Handshakes in flight at once. */
      readonly concurrency: number;
    }
  /** Open the next `count` connections and subscribe on each. */
  | { readonly type: 'connect'; readonly count: number }
  /** Answer with the current time, so the parent can check that both sides read the same clock. */
  | { readonly type: 'clock' }
  /** An order placed: the staff and this audience's subscriptions are to receive it. */
  | { readonly type: 'expect'; readonly orderId: string; readonly audience: string }
  /** Report what every subscription received of these orders (the measured events). */
  | { readonly type: 'report'; readonly orderIds: readonly string[] }
  /**
   * Open as many plain WebSocket connections to the floor server (bench/fanoutFloor.ts) as this process holds
   * on the app, and report each order id every one of them received as `delivered`.
   */
  | { readonly type: 'floor'; readonly url: string }
  /** Close every connection and exit. */
  | { readonly type: 'close' };

export interface ClientReport {
  readonly type: 'report';
  readonly subscriptions: number;
  /** Per subscription: 'staff' or its customer. */
  readonly audiences: readonly string[];
  /**
   * Receive time of each measured event by each subscription, subscription-major
   * (`times[s * orderIds.length + e]`); -1 where it never arrived.
   */
  readonly times: readonly number[];
  /** Events a subscription received more than once. */
  readonly duplicates: number;
  /** Subscriptions whose eventIds did not strictly increase. */
  readonly outOfOrder: number;
  /** `next` messages received in all (probes included). */
  readonly nextMessages: number;
  /** GraphQL errors, `error` and `complete` messages, unexpected closes: at most a few, as examples. */
  readonly problems: readonly string[];
  readonly problemCount: number;
  /** The text of the last `next` message received, as the app sent it. */
  readonly sample: string;
  /** This process's CPU time so far (µs). */
  readonly cpu: { readonly user: number; readonly system: number };
}

export type FromClient =
  | {
      readonly type: 'connected';
      readonly connections: number;
      readonly subscriptions: number;
      readonly failed: number;
      readonly errors: readonly string[];
    }
  /** Every live subscription of this process has received the event about `orderId`. */
  | { readonly type: 'delivered'; readonly orderId: string; readonly firstMs: number; readonly lastMs: number }
  | { readonly type: 'clock'; readonly at: number }
  | ClientReport
  | { readonly type: 'closed'; readonly forced: number }
  | { readonly type: 'floor-connected'; readonly connections: number; readonly failed: number };
