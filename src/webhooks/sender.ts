import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Webhook } from 'standardwebhooks';
import { tracing, type TraceCarrier } from '../tracing.js';
import { createTargetGuard, hostOf, RefusedTarget, type HostLookup, type ResolvedAddress } from './addresses.js';

/** A response body is read up to this many bytes and then dropped: receivers cannot make us buffer more. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/** How one attempt ended, as metrics label it. */
export type AttemptResult = 'success' | 'http_error' | 'timeout' | 'network_error' | 'refused_address';

export interface SendOutcome {
  readonly result: AttemptResult;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly durationMs: number;
}

export interface OutgoingMessage {
  /** The `webhook-id`: the same on every attempt. */
  readonly id: string;
  readonly type: string;
  readonly url: string;
  readonly body: string;
  /** Each secret signs the message; the signatures go space-separated in one header. */
  readonly secrets: readonly string[];
  /** The trace of the order change the message is about: the attempt's span links to it. */
  readonly trace?: TraceCarrier;
}

/** Opens the socket of a request: Node's own by default; tests pass one that counts (and refuses) connections. */
export type CreateConnection = (
  options: Record<string, unknown>,
  callback: (err: Error | null, socket: Socket) => void,
) => Socket | undefined;

export interface SenderOptions {
  readonly timeoutMs: number;
  readonly allowPrivate: boolean;
  /** Sockets kept to one host and port (several endpoints may share one). */
  readonly maxSocketsPerHost: number;
  readonly lookup?: HostLookup;
  readonly createConnection?: CreateConnection;
}

const USER_AGENT = 'orders-api-webhooks/1 (+https://www.standardwebhooks.com/)';

/**
 * Sends one signed message over node:http(s), Standard Webhooks style: POST, `webhook-id`, `webhook-timestamp`,
 * `webhook-signature` (the `standardwebhooks` package signs). The host is resolved and checked before any socket is
 * opened, and the connection goes to the address checked. Redirects are not followed (a 3xx is a failed attempt);
 * the whole attempt, resolving included, is bounded by the timeout.
 */
export function createSender(opts: SenderOptions) {
  const guard = createTargetGuard({ allowPrivate: opts.allowPrivate, ...(opts.lookup ? { lookup: opts.lookup } : {}) });
  const agentOptions = { keepAlive: true, maxSockets: opts.maxSocketsPerHost, maxFreeSockets: opts.maxSocketsPerHost };
  const agents = { 'http:': new http.Agent(agentOptions), 'https:': new https.Agent(agentOptions) };
  if (opts.createConnection) {
    for (const agent of Object.values(agents)) {
      (agent as unknown as { createConnection: CreateConnection }).createConnection = opts.createConnection;
    }
  }

  function post(url: URL, target: ResolvedAddress, headers: Record<string, string>, body: string, signal: AbortSignal) {
    return new Promise<{ statusCode: number }>((resolve, reject) => {
      const secure = url.protocol === 'https:';
      const host = hostOf(url);
      const req: ClientRequest = (secure ? https : http).request({
        protocol: url.protocol,
        host,
        port: url.port || (secure ? 443 : 80),
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers,
        agent: agents[secure ? 'https:' : 'http:'],
        signal,
        // The connection goes to the address that was checked: no second resolution can send it elsewhere.
        lookup: (_hostname, options, callback) => {
          const all = (options as { all?: boolean }).all;
          if (all) (callback as (e: null, a: ResolvedAddress[]) => void)(null, [target]);
          else (callback as (e: null, a: string, f: number) => void)(null, target.address, target.family);
        },
        ...(secure && isIP(host) === 0 ? { servername: host } : {}),
      });
      req.once('error', reject);
      req.once('response', (res: IncomingMessage) => {
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) {
            // Enough: the status is known, the rest is not wanted (and the connection is not reused).
            res.destroy();
            resolve({ statusCode: res.statusCode ?? 0 });
          }
        });
        res.once('end', () => resolve({ statusCode: res.statusCode ?? 0 }));
        res.once('error', reject);
      });
      req.end(body);
    });
  }

  async function attempt(message: OutgoingMessage): Promise<Omit<SendOutcome, 'durationMs'>> {
    const url = new URL(message.url);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error('timeout')), opts.timeoutMs);
    try {
      const target = await Promise.race([
        guard.resolve(url),
        new Promise<never>((_, reject) =>
          controller.signal.addEventListener('abort', () => reject(controller.signal.reason as Error), { once: true }),
        ),
      ]);
      const now = new Date();
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        'webhook-id': message.id,
        'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
        'webhook-signature': message.secrets
          .map((secret) => new Webhook(secret).sign(message.id, now, message.body))
          .join(' '),
      };
      tracing.inject(headers);
      const { statusCode } = await post(url, target, headers, message.body, controller.signal);
      const ok = statusCode >= 200 && statusCode < 300;
      return { result: ok ? 'success' : 'http_error', statusCode, error: ok ? null : `HTTP ${statusCode}` };
    } catch (error) {
      if (error instanceof RefusedTarget) return { result: 'refused_address', statusCode: null, error: error.message };
      if (controller.signal.aborted) {
        return { result: 'timeout', statusCode: null, error: `no answer within ${opts.timeoutMs} ms` };
      }
      const code = (error as NodeJS.ErrnoException).code;
      return { result: 'network_error', statusCode: null, error: code ?? (error as Error).message ?? 'network error' };
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    /** The registration check of where a URL goes (the domain's port). */
    targets: { refusal: (url: URL) => guard.refusal(url) },

    /** One attempt, in an HTTP client span linked to the trace of the change it reports. */
    send(message: OutgoingMessage): Promise<SendOutcome> {
      const url = new URL(message.url);
      return tracing.inSpan(
        'POST',
        {
          kind: 'client',
          root: true,
          ...(message.trace ? { links: [message.trace] } : {}),
          attributes: {
            'http.request.method': 'POST',
            'server.address': hostOf(url),
            'server.port': Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
            'url.scheme': url.protocol.slice(0, -1),
            'webhook.message.id': message.id,
            'webhook.event.type': message.type,
          },
        },
        async (span) => {
          const started = performance.now();
          const outcome = await attempt(message);
          if (outcome.statusCode !== null) span?.setAttribute('http.response.status_code', outcome.statusCode);
          if (outcome.result !== 'success') tracing.fail(span, outcome.result);
          return { ...outcome, durationMs: Math.round(performance.now() - started) };
        },
      );
    },

    close() {
      for (const agent of Object.values(agents)) agent.destroy();
    },
  };
}

export type Sender = ReturnType<typeof createSender>;
