import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request the receiver got, as it arrived. */
export interface ReceivedWebhook {
  readonly id: string;
  readonly timestamp: string;
  readonly signature: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  /** When it arrived (ms since the epoch, this process's clock). */
  readonly at: number;
  /** The parsed body. */
  readonly payload: {
    type: string;
    timestamp: string;
    data: { order?: { id: string; status: string } } & Record<string, unknown>;
  };
}

/** How the receiver answers one request: a status, optionally after holding it, optionally with headers or a body. */
export interface Answer {
  status?: number;
  /** Held until this promise settles (a stalled receiver). */
  holdUntil?: Promise<unknown>;
  /** Held this long after the request arrived (a slow receiver). */
  delayMs?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
}

export interface WebhookReceiver {
  /** http://127.0.0.1:PORT/hook */
  readonly url: string;
  readonly port: number;
  readonly received: ReceivedWebhook[];
  /** TCP connections accepted so far. */
  connections(): number;
  /** The most requests of one webhook-id being answered at once. */
  maxConcurrentPerId(): number;
  /** The most requests being answered at once, whatever their ids. */
  maxInFlight(): number;
  /** Requests being answered now (held open by this receiver, not yet given up by the sender). */
  inFlight(): number;
  /** Answers the next requests in order (then 200). */
  answer(...answers: Answer[]): void;
  /** Resolves once `match` holds over everything received (checked on every arrival). */
  waitFor(
    match: (all: readonly ReceivedWebhook[]) => boolean,
    what?: string,
    timeoutMs?: number,
  ): Promise<ReceivedWebhook[]>;
  /** Verifies a request with the package's own `Webhook.verify`: throws when no signature matches. */
  verify(message: ReceivedWebhook, secret: string): unknown;
  close(): Promise<void>;
}

/** A real HTTP receiver on loopback, as an integrator would run it. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const queue: Answer[] = [];
  const waiters = new Set<() => void>();
  const active = new Map<string, number>();
  let maxConcurrent = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let connections = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id'] ?? '');
      const now = (active.get(id) ?? 0) + 1;
      active.set(id, now);
      maxConcurrent = Math.max(maxConcurrent, now);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      let payload: ReceivedWebhook['payload'];
      try {
        payload = JSON.parse(body) as ReceivedWebhook['payload'];
      } catch {
        payload = { type: 'unparsable', timestamp: '', data: {} };
      }
      received.push({
        id,
        timestamp: String(req.headers['webhook-timestamp'] ?? ''),
        signature: String(req.headers['webhook-signature'] ?? ''),
        headers: req.headers,
        body,
        at: Date.now(),
        payload,
      });
      for (const wake of [...waiters]) wake();
      const answer = queue.shift() ?? {};
      let done = false;
      // Answered, or given up by the sender (its timeout): either way no longer in flight.
      const leave = () => {
        if (done) return;
        done = true;
        active.set(id, (active.get(id) ?? 1) - 1);
        inFlight--;
      };
      res.once('close', leave);
      const finish = () => {
        leave();
        if (res.destroyed) return;
        res.writeHead(answer.status ?? 200, { 'content-type': 'text/plain', ...answer.headers });
        res.end(answer.body ?? 'ok');
      };
      if (answer.holdUntil) void answer.holdUntil.then(finish, finish);
      else if (answer.delayMs) setTimeout(finish, answer.delayMs);
      else finish();
    });
  });
  server.on('connection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    connections: () => connections,
    maxConcurrentPerId: () => maxConcurrent,
    maxInFlight: () => maxInFlight,
    inFlight: () => inFlight,
    answer: (...answers) => void queue.push(...answers),
    waitFor(match, what = 'webhooks', timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!match(received)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve([...received]);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(
            new Error(
              `${what} did not arrive; received: ${JSON.stringify(received.map((r) => [r.id, r.payload.type]))}`,
            ),
          );
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    verify(message, secret) {
      return new Webhook(secret).verify(message.body, {
        'webhook-id': message.id,
        'webhook-timestamp': message.timestamp,
        'webhook-signature': message.signature,
      });
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close').catch(() => undefined);
    },
  };
}
