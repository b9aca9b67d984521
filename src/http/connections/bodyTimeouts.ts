import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { rawProblem, sendEarlyProblem } from '../problems/index.js';
import type { ConnectionTable } from './connectionTable.js';

/** Node's connections check runs this often: the request timeout is enforced within it. Its default is 30 s. */
export const CONNECTIONS_CHECK_MS = 250;

const hasBody = (req: IncomingMessage) =>
  req.headers['transfer-encoding'] !== undefined ||
  (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');

/**
 * Answers a request whose body did not arrive in time with 408 problem details, when nothing of the response is
 * written yet, and closes its connection (Node does once that answer is sent): the rest of the body is not waited
 * for. When the response has begun, the connection is cut.
 */
export function answerTimedOut(req: IncomingMessage, res: ServerResponse, detail: string): void {
  if (res.headersSent) {
    req.socket.destroy();
    return;
  }
  res.shouldKeepAlive = false;
  sendEarlyProblem(req, res, 'REQUEST_TIMEOUT', detail);
}

/**
 * The idle bound on request bodies: a body that sends nothing for `idleMs` is cut with 408. It runs on the socket's
 * own timer, which Node restarts on every chunk its parser reads (onParserExecute), so there is no polling; the timer
 * is only armed while a body is arriving. Bytes the app has not read yet (`readableLength`) mean the stall is ours,
 * not the client's: the timer starts again. The total bound is Node's `requestTimeout` (see `answerUnreadableRequest`).
 */
export function watchBody(
  req: IncomingMessage,
  res: ServerResponse,
  { idleMs, onTimedOut }: { idleMs: number; onTimedOut?: () => void },
): void {
  if (req.complete || !hasBody(req)) return;
  const { socket } = req;
  // Node emits 'timeout' on the request while its body is incomplete.
  req.on('timeout', () => {
    if (socket.destroyed) return;
    if (req.readableLength > 0) {
      socket.setTimeout(idleMs);
      return;
    }
    onTimedOut?.();
    answerTimedOut(req, res, `The request body sent nothing for ${idleMs / 1000} s.`);
  });
  // And on the response: listened to so that the idle timer, firing once the body is complete, only disarms itself
  // instead of making Node destroy the socket under a response still being worked on.
  res.on('timeout', () => {
    if (req.complete) socket.setTimeout(0);
  });
  socket.setTimeout(idleMs);
}

/**
 * The server's `clientError` listener. A request Node's parser gave up on never reaches Express: without this, Node
 * answers with a bare status line. Headers over Node's limit (16 KB unless --max-http-header-size says otherwise)
 * get 431 and anything else unreadable 400, as problem details like every other error. A request that outlived
 * `requestTimeout` (headers or body) gets 408 problem details: on its own response when the app is already
 * answering it. A socket already gone gets nothing.
 */
export function answerUnreadableRequest(
  table: ConnectionTable,
  opts: { maxHeaderBytes: number; requestTimeoutMs: number; onTimedOut?: () => void },
) {
  return (error: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      opts.onTimedOut?.();
      const detail = `The request took longer than ${opts.requestTimeoutMs / 1000} s to arrive.`;
      const current = table.connections.get(socket as Socket)?.current;
      if (current?.req.complete) socket.destroy();
      else if (current) answerTimedOut(current.req, current.res, detail);
      else socket.end(rawProblem('REQUEST_TIMEOUT', detail, '/'), () => socket.destroy());
      return;
    }
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
    const code = tooLarge ? 'HEADERS_TOO_LARGE' : 'MALFORMED_REQUEST';
    const detail = tooLarge
      ? `The request line and headers exceed ${opts.maxHeaderBytes / 1024} KB.`
      : 'The request could not be parsed as HTTP/1.1.';
    socket.end(rawProblem(code, detail, requestTarget(error)));
  };
}

/** The request target of the packet Node's parser failed on, when it starts with one (`GET /path HTTP/1.1`). */
function requestTarget(error: { rawPacket?: unknown }): string {
  const packet = Buffer.isBuffer(error.rawPacket) ? error.rawPacket.subarray(0, 4096).toString('latin1') : '';
  return /^[A-Z]{1,20} (\/[\x21-\x7e]*) HTTP\/1\.[01]\r\n/.exec(packet)?.[1] ?? '/';
}
