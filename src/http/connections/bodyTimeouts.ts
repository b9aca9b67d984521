import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendEarlyProblem } from '../problems/index.js';

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
