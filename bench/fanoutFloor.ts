/**
 * Child process of the fan-out bench: the floor. A plain `node:http` server with a `ws` WebSocketServer
 * (no compression, as the app) that the same subscriber processes connect to with as many sockets as
 * they hold on the app. Per event (the parent's `broadcast` request) it writes one identical,
 * prebuilt WebSocket text frame, the bytes of a `next` message the app sent, with the event's order
 * id and event id in it, straight to every TCP socket: one `write` per socket, nothing else. No auth,
 * no GraphQL, no protocol state: whatever the app spends per event beyond this is its own.
 */
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { WebSocketServer } from 'ws';
import { textFrame } from '../src/http/realtime/index.js';
import { reportFailure, serveParent } from './ipc.js';

/** One unmasked WebSocket text frame (RFC 6455 §5.2), built as the app builds its frames. */
const frameOf = (payload: Buffer) => textFrame(payload, Buffer.alloc(0), Buffer.alloc(0));

try {
  const sockets = new Set<Socket>();
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: 64 * 1024,
    handleProtocols: (protocols) => protocols.values().next().value ?? false,
  });
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      const raw = socket as Socket;
      raw.setNoDelay(true);
      sockets.add(raw);
      ws.on('close', () => sockets.delete(raw));
      // Nothing the subscribers send matters here.
      ws.on('error', () => undefined);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  serveParent(
    { url: `http://127.0.0.1:${port}` },
    async () => {
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    {
      /**
       * Writes the messages (strings, one per subscription of a connection) as frames to every socket, all of
       * them in one write; answers how many sockets.
       */
      broadcast: (messages) => {
        const bytes = Buffer.concat((messages as string[]).map((m) => frameOf(Buffer.from(m))));
        for (const socket of sockets) socket.write(bytes);
        return Promise.resolve(sockets.size);
      },
      memory: () => Promise.resolve({ sockets: sockets.size }),
    },
  );
} catch (error) {
  reportFailure(error);
}
