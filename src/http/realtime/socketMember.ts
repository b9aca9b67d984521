import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';
import { SUBSCRIBER_BUFFER } from './boundedStream.js';
import { SUBSCRIBER_BUFFER_BYTES, type Head, type Member, type SharedExecution } from './sharedExecution.js';

/** RFC 6455 §7.4.1: the close code for a message that violates the endpoint's policy (here: too slow). */
const POLICY_VIOLATION = 1008;

/**
 * One unmasked WebSocket text frame (RFC 6455 §5.2: a server never masks) of the message `before`, `head`, `after`:
 * the frame ws would build for the same message, its parts copied in with `set`, which makes no view of its own as
 * Buffer's `copy` does for each part.
 */
export function textFrame(before: Uint8Array, head: Uint8Array, after: Uint8Array): Buffer {
  const length = before.length + head.length + after.length;
  const header = length < 126 ? 2 : length < 65536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(header + length);
  frame[0] = 0x81; // FIN, opcode 1 (text)
  if (header === 2) frame[1] = length;
  else if (header === 4) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeBigUInt64BE(BigInt(length), 2);
  }
  frame.set(before, header);
  frame.set(head, header + before.length);
  frame.set(after, header + before.length + head.length);
  return frame;
}

/** A WebSocket subscriber of a shared execution: one object and one write callback per subscriber. */
export class SocketMember implements Member {
  /** Writes handed to the socket and not yet taken by the network. */
  private pending = 0;
  private readonly done = () => {
    this.pending -= 1;
  };

  constructor(
    private readonly socket: WebSocket,
    /** The TCP socket, when whole frames may be written to it directly. */
    private readonly direct: Duplex | undefined,
    /** The connection's operations. */
    private readonly slots: ReadonlyMap<string, unknown>,
    /** The message before the shared result, and after it. */
    private readonly before: Buffer,
    private readonly after: Buffer,
    private readonly sharedExecution: SharedExecution,
  ) {}

  write(head: Head) {
    const { socket, direct } = this;
    if (socket.readyState !== socket.OPEN) return;
    this.pending += 1;
    if (direct) {
      // Corked, a connection's messages of one slice of the fan-out leave in one system call; a connection with
      // one operation has nothing to batch, and corking would only delay and buffer its write.
      if (this.slots.size > 1) this.sharedExecution.cork(direct);
      direct.write(textFrame(this.before, head.bytes, this.after), this.done);
    } else {
      socket.send(Buffer.concat([this.before, head.bytes, this.after]), { binary: false }, this.done);
    }
  }

  backedUp() {
    return this.pending > SUBSCRIBER_BUFFER || this.socket.bufferedAmount > SUBSCRIBER_BUFFER_BYTES;
  }

  cutOff(reason: string) {
    this.socket.close(POLICY_VIOLATION, reason.slice(0, 120));
  }
}
