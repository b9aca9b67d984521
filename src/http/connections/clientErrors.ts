import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { rawProblem } from '../problems/index.js';
import { answerTimedOut } from './bodyTimeouts.js';
import type { ConnectionTable } from './connectionTable.js';

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

/**
 * The path of the request Node's parser failed on, from the packet it failed in when that starts with the request
 * line (`GET /path?query HTTP/1.1`): only the path, which ends at its query, fragment or the space before the
 * version, so a target too long for the parser (431) is still named. `/` when the packet shows no whole path.
 */
function requestTarget(error: { rawPacket?: unknown }): string {
  const packet = Buffer.isBuffer(error.rawPacket) ? error.rawPacket.toString('latin1') : '';
  return /^[A-Z]{1,20} (\/[\x21-\x7e]*?)[?# ]/.exec(packet)?.[1] ?? '/';
}
