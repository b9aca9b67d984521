import { createServer, type Server } from 'node:http';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

/** What the Orders API POSTs: the event type, when it happened, and the order as GET /v1/orders/{id} shows it. */
export interface OrderWebhook {
  type: 'order.created' | 'order.status_changed' | 'order.cancelled' | 'ping';
  timestamp: string;
  data: { order?: { id: string; status: string; total_cents: number } };
}

/**
 * A receiver for the Orders API's webhooks. It verifies each request with `standardwebhooks` against the raw body
 * (before any JSON parsing), answers 401 to anything that does not verify, skips a `webhook-id` it has already
 * handled (a retry of a message it took), and answers 2xx at once: slow work belongs in a queue of its own, since
 * the sender gives up after its timeout and sends the message again. During a secret rotation both secrets verify.
 */
export function webhookReceiver(secret: string, onEvent: (event: OrderWebhook, id: string) => void): Server {
  const webhook = new Webhook(secret);
  const handled = new Set<string>();
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let event: OrderWebhook;
      try {
        event = webhook.verify(Buffer.concat(chunks), {
          'webhook-id': String(req.headers['webhook-id']),
          'webhook-timestamp': String(req.headers['webhook-timestamp']),
          'webhook-signature': String(req.headers['webhook-signature']),
        }) as OrderWebhook;
      } catch (error) {
        res.writeHead(error instanceof WebhookVerificationError ? 401 : 400).end();
        return;
      }
      const id = String(req.headers['webhook-id']);
      if (!handled.has(id)) {
        handled.add(id);
        onEvent(event, id);
      }
      res.writeHead(204).end();
    });
  });
}
