import { randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import type pg from 'pg';
import request from 'supertest';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { resumingWsSubscription } from '../../examples/ws-resume.js';
import { eventually, startLoad, type Outcome, type Send } from './load.js';
import type { Nginx } from './nginx.js';
import type { Replica } from './replica.js';
import { resumableSse, within } from './streams.js';

/**
 * Issue 34's rolling restart under mixed load, as `npm run test:topology` (__tests__/topology/load-balancer.test.ts)
 * asserts it and `npm run bench -- --topology` states it: both run this one.
 */
export const ROLLING_RESTART = {
  /** The load: at least 50 requests/s for at least 30 s (issue 11). */
  rate: 60,
  seconds: 30,
  /** Subscribers through the balancer: half over WebSocket, half over SSE. */
  subscribers: 200,
} as const;

/** What the replicas of the rolling restart are given on top of behindBalancerEnv. */
export const ROLLING_RESTART_ENV: Readonly<Record<string, string>> = {
  // compose's: /readyz says 503 for 5 s before the drain (nginx has no active health checks, so it keeps sending).
  DRAIN_DELAY_S: '5',
  // Every subscriber is one user's, all on one replica while the other restarts, all from one client address: the
  // limits that would meet them first are issue 34's items 1 and 2, not what the restart measures.
  STREAMS_MAX_PER_USER: '1000',
  WS_MAX_PER_IP: '1000',
  HTTP_MAX_CONNECTIONS_PER_IP: '5000',
  RATE_LIMIT_POINTS: '1000000000',
  // Successful requests are logged at info only when sampled: every one of them here (a restarted replica is taken
  // back once it has logged one).
  REQUEST_LOG_SAMPLE: '1',
};

export const ITEMS = [{ sku: 'KB-001', qty: 1 }];

/**
 * How many client addresses the load comes from (127.2.0.1 on), a request from each in turn. The balancer bounds
 * connections in progress per client address (deploy/nginx.conf's `limit_conn per_client`, 256), and the
 * subscribers, from 127.0.0.1, hold 200 of them: one address for 60 requests/s as well would have nginx refuse
 * requests whenever a loaded machine slows the replicas, which is that limit at work, not the restart.
 */
const LOAD_CLIENTS = 16;

/** A keyed POST /v1/orders: nginx may send it to the other replica, and the key makes that safe. */
export function keyedCreate(url: string, token: string, key = randomUUID(), from?: Agent) {
  const post = request(url).post('/v1/orders');
  if (from) post.agent(from);
  return post.set('authorization', `Bearer ${token}`).set('idempotency-key', key).send({ items: ITEMS });
}

/**
 * A graphql-ws subscriber to orderCreated that resumes as examples/ws-resume.ts does (extensions.lastEventId), with
 * the client's own retries: `ids` are the orders delivered, replays included; `closes` the close codes it saw.
 */
export function wsSubscriber(url: string, token: string) {
  const ids: string[] = [];
  const closes: number[] = [];
  const waiters: (() => void)[] = [];
  let failure: unknown;
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  const client = createClient({
    url: `${url.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 20,
    // A device backs off; a short one keeps the run short (graphql-ws's default grows to seconds).
    retryWait: () => new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 400)),
    on: { closed: (event) => void closes.push((event as { code: number }).code) },
  });
  const stop = resumingWsSubscription<{ orderCreated: { id: string } }>(
    client,
    { query: 'subscription { orderCreated { id } }' },
    {
      next(result) {
        if (result.data?.orderCreated) ids.push(result.data.orderCreated.id);
        wake();
      },
      error(error) {
        failure = error;
        wake();
      },
      complete: wake,
    },
  );
  return {
    ids,
    closes,
    failure: () => failure,
    async until(predicate: (ids: readonly string[]) => boolean) {
      while (!predicate(ids)) {
        if (failure !== undefined) throw new Error(`the subscription failed: ${JSON.stringify(failure)}`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async close() {
      stop();
      await client.dispose();
    },
  };
}

export interface RollingRestartRun {
  /** Every request of the load, in the order sent. */
  readonly outcomes: Outcome[];
  /** From the first request sent to the last. */
  readonly seconds: number;
  /** Each replica's exit code after its SIGTERM. */
  readonly exits: (number | null)[];
  /** Every Idempotency-Key sent, and the keyed creates answered 201 with the order each made. */
  readonly keys: string[];
  readonly created: { key: string; id: string }[];
  /** Orders made by un-keyed GraphQL createOrder mutations answered 200. */
  readonly mutated: string[];
  /** The idempotency_keys rows of `keys`: key → order. */
  readonly storedKeys: Map<string, string>;
  /** Every order stored after the probe, and every order answered (created and mutated): both sorted. */
  readonly stored: string[];
  readonly expected: string[];
  /** The orders each subscriber received after the probe, in arrival order, replays included. */
  readonly sse: { ids: string[]; reconnects: { lastEventId: string | undefined; status: number | string }[] }[];
  readonly ws: { ids: string[]; closes: number[]; failure: unknown }[];
  /** (subscriber, orders it never received) once `settleMs` had passed; empty when all arrived. */
  readonly missing: [number, number][];
}

/**
 * `subscribers` (half SSE resuming with Last-Event-ID, half WebSocket resuming with extensions.lastEventId) on the
 * orderCreated stream through `nginx`, then `rate` requests/s for `seconds` s of keyed REST creates, REST reads,
 * un-keyed GraphQL createOrder mutations and GraphQL queries, during which each replica in turn gets SIGTERM and is
 * started again by `restart(i)` (which replaces `replicas[i]`). Returns what happened; asserts nothing.
 */
export async function runRollingRestart(opts: {
  nginx: Nginx;
  replicas: Replica[];
  restart: (i: number) => Promise<Replica>;
  db: Pick<pg.Client, 'query'>;
  /** The load's token, and the subscribers' (another user, whose orderCreated stream sees the load's orders). */
  token: string;
  subscriberToken: string;
  rate?: number;
  seconds?: number;
  subscribers?: number;
  /** How long every subscriber is given to receive every order once the load has stopped. */
  settleMs?: number;
}): Promise<RollingRestartRun> {
  const { nginx, replicas, token } = opts;
  const rate = opts.rate ?? ROLLING_RESTART.rate;
  const seconds = opts.seconds ?? ROLLING_RESTART.seconds;
  const count = opts.subscribers ?? ROLLING_RESTART.subscribers;
  const auth = { authorization: `Bearer ${opts.subscriberToken}` };
  const streams = Array.from({ length: Math.ceil(count / 2) }, () => resumableSse(nginx.url, auth));
  const sockets = Array.from({ length: Math.floor(count / 2) }, () => wsSubscriber(nginx.url, opts.subscriberToken));
  const subscribers = [...streams, ...sockets];
  const created: { key: string; id: string }[] = [];
  const keys: string[] = [];
  const mutated: string[] = [];
  // A connection a request, as supertest's own default (agent: false), from the load's addresses.
  const clients = Array.from({ length: LOAD_CLIENTS }, (_, i) => new Agent({ localAddress: `127.2.0.${i + 1}` }));
  const graphql = (from: Agent, body: object) =>
    request(nginx.url)
      .post('/graphql')
      .agent(from)
      .set('authorization', `Bearer ${token}`)
      .set('accept', 'application/graphql-response+json')
      .send(body);
  const send: Send = async (n) => {
    const kind = n % 6;
    const from = clients[n % LOAD_CLIENTS]!;
    if (kind === 0) {
      const key = randomUUID();
      keys.push(key);
      const res = await keyedCreate(nginx.url, token, key, from);
      if (res.status === 201) created.push({ key, id: res.body.id as string });
      return { name: 'POST /v1/orders', status: res.status, body: res.status === 201 ? undefined : res.body };
    }
    if (kind === 1 || kind === 4) {
      const last = created.at(-1);
      const res = await request(nginx.url)
        .get(last ? `/v1/orders/${last.id}` : '/v1/orders')
        .agent(from)
        .set('authorization', `Bearer ${token}`);
      return { name: 'GET /v1/orders', status: res.status, body: res.status === 200 ? undefined : res.body };
    }
    if (kind === 3) {
      // No idempotency key: nginx cannot send it again, so the replica it reaches must serve it.
      const res = await graphql(from, {
        query: 'mutation ($input: CreateOrderInput!) { createOrder(input: $input) { id } }',
        variables: { input: { items: ITEMS } },
      });
      const id = (res.body as { data?: { createOrder?: { id: string } } }).data?.createOrder?.id;
      if (res.status === 200 && id) mutated.push(id);
      const ok = res.status === 200 && id !== undefined;
      return { name: 'POST /graphql createOrder', status: ok ? 200 : res.status, body: ok ? undefined : res.body };
    }
    const res = await graphql(from, { query: '{ recentOrders(first: 5) { id state } }' });
    const ok = res.status === 200 && (res.body as { errors?: unknown }).errors === undefined;
    return { name: 'POST /graphql query', status: ok ? 200 : 'error', body: ok ? undefined : res.body };
  };
  try {
    // Probes until every subscriber has received one (so each is live), then one that all receive: the orders
    // after it are the run's.
    await eventually('every subscriber to receive an order', async () => {
      await keyedCreate(nginx.url, token).expect(201);
      return subscribers.every((s) => s.ids.length > 0);
    });
    const probe = (await keyedCreate(nginx.url, token).expect(201)).body.id as string;
    await within(
      60_000,
      'every subscriber to receive the probe',
      Promise.all(subscribers.map((s) => s.until((ids) => ids.includes(probe)))),
    );
    const load = startLoad({ rate, maxRequests: rate * (seconds + 60), send });
    const started = Date.now();
    const exits: (number | null)[] = [];
    try {
      for (const i of replicas.keys()) {
        exits.push(await replicas[i]!.stop('SIGTERM'));
        replicas[i] = await opts.restart(i);
        // As an orchestrator waits for a new replica to take traffic before it stops the next one: nginx has no
        // active health checks, so a replica it saw refusing stays out of rotation for fail_timeout after it is back.
        await replicas[i]!.waitForLog((e) => e.msg === 'request completed');
      }
      const left = seconds * 1000 - (Date.now() - started);
      if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
    } finally {
      load.stop();
    }
    const outcomes = await load.done();

    const { rows: keyRows } = await opts.db.query<{ key: string; order_id: string }>(
      'select key, order_id from idempotency_keys where key = any($1)',
      [keys],
    );
    const { rows } = await opts.db.query<{ id: string }>(
      `select id from orders where created_at >= (select created_at from orders where id = $1) and id <> $1`,
      [probe],
    );
    const expected = [...created.map((c) => c.id), ...mutated].sort();
    const missing = () =>
      subscribers
        .map((s, i): [number, number] => [i, expected.filter((id) => !s.ids.includes(id)).length])
        .filter(([, n]) => n > 0);
    await within(
      opts.settleMs ?? 60_000,
      'every subscriber to receive every order',
      Promise.all(subscribers.map((s) => s.until((got) => expected.every((id) => got.includes(id))))),
    ).catch(() => undefined);
    const after = (ids: string[]) => ids.slice(ids.indexOf(probe) + 1);
    return {
      outcomes,
      seconds: (outcomes.at(-1)!.sentAt - outcomes[0]!.sentAt) / 1000,
      exits,
      keys,
      created,
      mutated,
      storedKeys: new Map(keyRows.map((r) => [r.key, r.order_id])),
      stored: rows.map((r) => r.id).sort(),
      expected,
      sse: streams.map((s) => ({ ids: after(s.ids), reconnects: [...s.reconnects] })),
      ws: sockets.map((s) => ({ ids: after(s.ids), closes: [...s.closes], failure: s.failure() })),
      missing: missing(),
    };
  } finally {
    // Closed whatever happened above: a stream left reconnecting would keep the process from exiting.
    await Promise.all(subscribers.map((s) => s.close()));
    for (const agent of clients) agent.destroy();
  }
}

/** Events the subscribers of a run should have received (every order answered, to each), and what they did. */
export function eventTally(run: RollingRestartRun) {
  const all = [...run.sse, ...run.ws];
  const answered = new Set(run.expected);
  let received = 0;
  let duplicated = 0;
  let unexpected = 0;
  for (const { ids } of all) {
    const distinct = new Set(ids);
    duplicated += ids.length - distinct.size;
    for (const id of distinct) {
      if (answered.has(id)) received++;
      else unexpected++;
    }
  }
  const expected = run.expected.length * all.length;
  return { expected, received, lost: expected - received, duplicated, unexpected };
}
