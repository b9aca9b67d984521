import { request as httpRequest, type ClientRequest } from 'node:http';
import WebSocket from 'ws';

/**
 * Live devices, each holding one `orderCreated` subscription through the balancer from a loopback source address of
 * its own range (127.0.0.0/8), so that the balancer sees ~`perAddress` devices per client address, as behind an
 * office or carrier network. WebSockets speak graphql-transport-ws with the plain `ws` package; SSE streams are
 * graphql-sse's distinct-connections mode over node:http (fetch cannot pick its source address). Kept lean: a few
 * thousand of them share this process's event loop with the code that measures them.
 */
export interface Device {
  readonly kind: 'ws' | 'sse';
  readonly from: string;
  /** performance.now() when the subscription was acknowledged (WS: connection_ack then subscribe sent; SSE: 200). */
  acknowledgedAt?: number;
  /** What ended it before it was acknowledged: a status, a close code, or an error code. */
  refused?: string;
  /** orderCreated ids received, with performance.now() at arrival. */
  readonly received: Map<string, number>;
  close(): void;
}

export interface DeviceOptions {
  /** The balancer's URL. */
  url: string;
  token: string;
  query?: string;
  /** Devices per client address; addresses are 127.1.x.y from `firstAddress` on. */
  perAddress: number;
  firstAddress?: number;
}

const ORDER_CREATED = 'subscription { orderCreated { id } }';

/** The n-th address of 127.1.0.0/16 (n from 0): clear of 127.0.0.1, where the balancer itself connects from. */
export const deviceAddress = (n: number) => `127.1.${Math.floor(n / 250)}.${(n % 250) + 1}`;

type OrderCreated = { data?: { orderCreated?: { id?: string } } };
const idOf = (json: string) => (JSON.parse(json) as OrderCreated).data?.orderCreated?.id;

export function wsDevice(opts: DeviceOptions, index: number): Device {
  const from = deviceAddress((opts.firstAddress ?? 0) + Math.floor(index / opts.perAddress));
  const socket = new WebSocket(`${opts.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws', {
    localAddress: from,
  });
  const device: Device = { kind: 'ws', from, received: new Map(), close: () => socket.terminate() };
  socket.on('unexpected-response', (_req, res) => (device.refused = `HTTP ${res.statusCode}`));
  socket.on('error', (err: NodeJS.ErrnoException) => (device.refused ??= err.code ?? err.message));
  socket.on('close', (code) => {
    if (device.acknowledgedAt === undefined) device.refused ??= `close ${code}`;
  });
  socket.on('open', () =>
    socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${opts.token}` } })),
  );
  socket.on('message', (raw) => {
    const message = JSON.parse(String(raw)) as { type: string; payload?: OrderCreated };
    const id = message.type === 'next' ? message.payload?.data?.orderCreated?.id : undefined;
    if (id) return void device.received.set(id, performance.now());
    const { type } = message;
    if (type === 'ping') return socket.send('{"type":"pong"}');
    if (type !== 'connection_ack') return;
    socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: opts.query ?? ORDER_CREATED } }));
    device.acknowledgedAt = performance.now();
  });
  return device;
}

export function sseDevice(opts: DeviceOptions, index: number): Device {
  const from = deviceAddress((opts.firstAddress ?? 0) + Math.floor(index / opts.perAddress));
  const { hostname, port } = new URL(opts.url);
  const body = JSON.stringify({ query: opts.query ?? ORDER_CREATED });
  const device: Device = { kind: 'sse', from, received: new Map(), close: () => req.destroy() };
  const req: ClientRequest = httpRequest(
    {
      host: hostname,
      port,
      method: 'POST',
      path: '/graphql/stream',
      localAddress: from,
      agent: false,
      headers: {
        accept: 'text/event-stream',
        'content-type': 'application/json',
        authorization: `Bearer ${opts.token}`,
        'content-length': Buffer.byteLength(body),
      },
    },
    (res) => {
      if (res.statusCode !== 200) {
        device.refused = `HTTP ${res.statusCode}`;
        res.resume();
        return;
      }
      device.acknowledgedAt = performance.now();
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        pending += chunk;
        const events = pending.split('\n\n');
        pending = events.pop()!;
        for (const event of events) {
          const data = event.split('\n').find((line) => line.startsWith('data:'));
          const id = data ? idOf(data.slice(5)) : undefined;
          if (id) device.received.set(id, performance.now());
        }
      });
    },
  );
  req.on('error', (err: NodeJS.ErrnoException) => (device.refused ??= err.code ?? err.message));
  req.end(body);
  return device;
}

/** Opens `count` devices of a kind, `perBatch` at a time (a burst of thousands of handshakes is its own test). */
export async function openDevices(
  kind: 'ws' | 'sse',
  count: number,
  opts: DeviceOptions & { perBatch?: number },
  settled: (devices: readonly Device[]) => boolean = (ds) => ds.every((d) => d.acknowledgedAt || d.refused),
): Promise<Device[]> {
  const devices: Device[] = [];
  const perBatch = opts.perBatch ?? 200;
  for (let start = 0; start < count; start += perBatch) {
    const batch = Array.from({ length: Math.min(perBatch, count - start) }, (_, i) =>
      (kind === 'ws' ? wsDevice : sseDevice)(opts, start + i),
    );
    devices.push(...batch);
    while (!settled(batch)) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return devices;
}
