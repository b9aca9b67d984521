/**
 * Child process of the fan-out bench: a share of the WebSocket subscribers. It speaks the
 * graphql-ws protocol (`graphql-transport-ws`) with the plain `ws` package — connection_init with
 * the bearer token, then `subscribe` messages once acknowledged — and stamps every `next` message
 * with the machine's monotonic clock the moment it arrives (see fanoutIpc.ts).
 *
 * It exits when told to, or when the parent goes away.
 */
import WebSocket, { type RawData } from 'ws';
import type { ClientReport, FromClient, ToClient } from './fanoutIpc.js';

const HANDSHAKE_TIMEOUT_MS = 20_000;
const CLOSE_TIMEOUT_MS = 5_000;
const MAX_PROBLEM_EXAMPLES = 8;

interface Subscription {
  readonly audience: string;
  /** orderId → receive time (ms since base). */
  readonly received: Map<string, number>;
  lastEventId: bigint;
  duplicates: number;
  outOfOrder: boolean;
}

type Init = Extract<ToClient, { type: 'init' }>;

let init: Init | undefined;
let base = 0n;
const now = () => Number(process.hrtime.bigint() - base) / 1e6;

const sockets: WebSocket[] = [];
const subscriptions: Subscription[] = [];
let opened = 0;
let live = 0;
let closing = false;
let nextMessages = 0;
let sample = '';
let problemCount = 0;
const problems: string[] = [];
/** orderId → [deliveries so far, first receive time, last receive time]. */
const counts = new Map<string, [number, number, number]>();
/** Live subscriptions by audience, and the audience each announced order belongs to. */
const liveBy = new Map<string, number>();
const expected = new Map<string, string>();

/** Reports an order once every live subscription that may see it has it. */
function checkDelivered(orderId: string): void {
  const count = counts.get(orderId);
  const audience = expected.get(orderId);
  if (!count || audience === undefined) return;
  const want = (liveBy.get('staff') ?? 0) + (audience === 'staff' ? 0 : (liveBy.get(audience) ?? 0));
  if (count[0] === want) send({ type: 'delivered', orderId, firstMs: count[1], lastMs: count[2] });
}

function send(message: FromClient): void {
  process.send?.(message);
}

function problem(text: string): void {
  problemCount++;
  if (problems.length < MAX_PROBLEM_EXAMPLES) problems.push(text);
}

interface Message {
  type: string;
  id?: string;
  payload?: {
    data?: { orderCreated?: { id?: string }; orderUpdated?: { id?: string } } | null;
    errors?: { message: string }[];
    extensions?: { eventId?: string };
  };
}

function onNext(sub: Subscription, message: Message, at: number): void {
  nextMessages++;
  const payload = message.payload;
  if (payload?.errors?.length) return problem(`GraphQL error: ${payload.errors[0]!.message}`);
  const order = payload?.data?.orderCreated ?? payload?.data?.orderUpdated;
  const eventId = payload?.extensions?.eventId;
  if (!order?.id || !eventId) return problem(`next without order id or eventId: ${JSON.stringify(payload)}`);
  const id = BigInt(eventId);
  if (id <= sub.lastEventId) sub.outOfOrder = true;
  sub.lastEventId = id;
  if (sub.received.has(order.id)) {
    sub.duplicates++;
    return;
  }
  sub.received.set(order.id, at);
  const count = counts.get(order.id) ?? [0, at, at];
  count[0]++;
  count[2] = at;
  counts.set(order.id, count);
  checkDelivered(order.id);
}

/** Opens one connection, and resolves once the server has acknowledged it and the subscribes are sent. */
function open(token: string, audience: string, cfg: Init): Promise<void> {
  const first = subscriptions.length;
  const mine: Subscription[] = [];
  for (let i = 0; i < cfg.perConnection; i++) {
    const sub: Subscription = { audience, received: new Map(), lastEventId: 0n, duplicates: 0, outOfOrder: false };
    subscriptions.push(sub);
    mine.push(sub);
  }
  return new Promise<void>((resolve, reject) => {
    let acknowledged = false;
    const ws = new WebSocket(cfg.wsUrl, 'graphql-transport-ws', {
      perMessageDeflate: false,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
    });
    sockets.push(ws);
    const timer = setTimeout(() => {
      if (acknowledged) return;
      ws.terminate();
      reject(new Error('no connection_ack in time'));
    }, HANDSHAKE_TIMEOUT_MS);
    ws.on('open', () => {
      ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } }));
    });
    ws.on('message', (data: RawData) => {
      const at = now();
      let message: Message;
      const text = data.toString();
      try {
        message = JSON.parse(text) as Message;
      } catch {
        return problem(`unparsable message: ${data.toString().slice(0, 120)}`);
      }
      switch (message.type) {
        case 'next': {
          sample = text;
          const sub = mine[Number(message.id) - 1];
          if (!sub) return problem(`next for an unknown subscription id ${message.id}`);
          return onNext(sub, message, at);
        }
        case 'connection_ack':
          acknowledged = true;
          clearTimeout(timer);
          for (let i = 1; i <= cfg.perConnection; i++) {
            ws.send(JSON.stringify({ id: String(i), type: 'subscribe', payload: { query: cfg.query } }));
          }
          live += cfg.perConnection;
          liveBy.set(audience, (liveBy.get(audience) ?? 0) + cfg.perConnection);
          return resolve();
        case 'ping':
          return ws.send(JSON.stringify({ type: 'pong' }));
        case 'pong':
          return;
        case 'error':
          return problem(`error for subscription ${first + Number(message.id)}: ${JSON.stringify(message.payload)}`);
        case 'complete':
          return problem(`the server completed subscription ${first + Number(message.id)}`);
        default:
          return problem(`unexpected message type ${message.type}`);
      }
    });
    ws.on('error', (error) => {
      if (!acknowledged) {
        clearTimeout(timer);
        reject(error);
      } else if (!closing) problem(`socket error: ${error.message}`);
    });
    ws.on('close', (code, reason) => {
      if (!acknowledged) {
        clearTimeout(timer);
        reject(new Error(`closed before connection_ack: ${code} ${reason.toString()}`));
        return;
      }
      if (!closing) {
        live -= cfg.perConnection;
        liveBy.set(audience, (liveBy.get(audience) ?? 0) - cfg.perConnection);
        problem(`connection closed by the server: ${code} ${reason.toString()}`);
      }
    });
  });
}

async function connect(count: number): Promise<void> {
  const cfg = init!;
  const end = Math.min(opened + count, cfg.tokens.length);
  let failed = 0;
  const errors: string[] = [];
  const worker = async () => {
    while (opened < end) {
      const i = opened++;
      await open(cfg.tokens[i]!, cfg.audiences[i]!, cfg).catch((error: unknown) => {
        failed++;
        if (errors.length < MAX_PROBLEM_EXAMPLES) errors.push(error instanceof Error ? error.message : String(error));
      });
    }
  };
  await Promise.all(Array.from({ length: cfg.concurrency }, worker));
  send({
    type: 'connected',
    connections: sockets.filter((s) => s.readyState === WebSocket.OPEN).length,
    subscriptions: live,
    failed,
    errors,
  });
}

function report(orderIds: readonly string[]): ClientReport {
  const times: number[] = [];
  let duplicates = 0;
  let outOfOrder = 0;
  for (const sub of subscriptions) {
    for (const id of orderIds) times.push(sub.received.get(id) ?? -1);
    duplicates += sub.duplicates;
    if (sub.outOfOrder) outOfOrder++;
  }
  return {
    type: 'report',
    subscriptions: subscriptions.length,
    audiences: subscriptions.map((s) => s.audience),
    times,
    duplicates,
    outOfOrder,
    nextMessages,
    problems,
    problemCount,
    sample,
    cpu: process.cpuUsage(),
  };
}

const floorSockets: WebSocket[] = [];
/** orderId → [deliveries so far, first receive time, last receive time], on the floor's sockets. */
const floorCounts = new Map<string, [number, number, number]>();

/** Opens one plain connection to the floor server, which only ever sends `next` messages. */
function openFloor(url: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const ws = new WebSocket(url, 'graphql-transport-ws', {
      perMessageDeflate: false,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
    });
    floorSockets.push(ws);
    ws.on('open', () => resolve());
    ws.on('message', (data: RawData) => {
      const at = now();
      const orderId = (JSON.parse(data.toString()) as Message).payload?.data?.orderCreated?.id;
      if (!orderId) return problem('floor message without an order id');
      const count = floorCounts.get(orderId) ?? [0, at, at];
      count[0]++;
      count[2] = at;
      floorCounts.set(orderId, count);
      if (count[0] === floorSockets.length * init!.perConnection)
        send({ type: 'delivered', orderId, firstMs: count[1], lastMs: count[2] });
    });
    ws.on('error', reject);
    ws.on('close', () => {
      if (!closing) problem('the floor closed a connection');
    });
  });
}

async function connectFloor(url: string): Promise<void> {
  const cfg = init!;
  let next = 0;
  let failed = 0;
  const worker = async () => {
    while (next < sockets.length) {
      next++;
      await openFloor(url).catch(() => void failed++);
    }
  };
  await Promise.all(Array.from({ length: cfg.concurrency }, worker));
  send({ type: 'floor-connected', connections: floorSockets.length - failed, failed });
}

async function closeAll(): Promise<void> {
  closing = true;
  for (const s of floorSockets) s.terminate();
  const open = sockets.filter((s) => s.readyState !== WebSocket.CLOSED);
  const closed = Promise.all(open.map((s) => new Promise((resolve) => s.once('close', resolve))));
  for (const s of open) s.close(1000, 'bench done');
  let forced = 0;
  const timer = setTimeout(() => {
    for (const s of open) {
      if (s.readyState !== WebSocket.CLOSED) {
        forced++;
        s.terminate();
      }
    }
  }, CLOSE_TIMEOUT_MS);
  await closed;
  clearTimeout(timer);
  send({ type: 'closed', forced });
}

process.on('message', (message: ToClient) => {
  void (async () => {
    switch (message.type) {
      case 'init':
        init = message;
        base = BigInt(message.base);
        return;
      case 'connect':
        return connect(message.count);
      case 'clock':
        return send({ type: 'clock', at: now() });
      case 'expect':
        expected.set(message.orderId, message.audience);
        return checkDelivered(message.orderId);
      case 'report':
        return send(report(message.orderIds));
      case 'floor':
        return connectFloor(message.url);
      case 'close':
        await closeAll();
        process.disconnect?.();
        return process.exit(0);
    }
  })().catch((error: unknown) => {
    console.error(`[fanout client ${process.pid}] ${error instanceof Error ? error.stack : String(error)}`);
    process.exit(1);
  });
});
// The parent went away (or is done): nothing here should outlive it.
process.on('disconnect', () => {
  for (const s of [...sockets, ...floorSockets]) s.terminate();
  process.exit(0);
});
process.on('SIGINT', () => undefined);
