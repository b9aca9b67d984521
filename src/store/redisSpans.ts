import { tracingChannel } from 'node:diagnostics_channel';
import { tracing, type Span } from '../tracing.js';

/** What ioredis publishes for each command on its `ioredis:command` tracing channel (its CommandTraceContext). */
interface CommandMessage {
  readonly command: string;
  readonly database?: number;
  readonly serverAddress?: string;
  readonly serverPort?: number;
  readonly error?: unknown;
}

const SPAN = Symbol('span');
type Traced = CommandMessage & { [SPAN]?: Span };

let users = 0;
let unsubscribe: (() => void) | undefined;

/**
 * A client span per Redis command sent inside a traced request, from the tracing channel ioredis publishes on (its
 * documented diagnostics_channel hook: no module is patched, so it works the same under ESM, tsx and Jest). The span
 * names the command and the server, never the arguments: keys hold client addresses and subjects, values payloads.
 * Commands outside any span (the event bus, sweeps) are not traced. Process-wide, like tracing; the last caller to
 * stop unsubscribes.
 */
export function traceRedisCommands(): () => void {
  if (users++ === 0) {
    const channel = tracingChannel<string, Traced>('ioredis:command');
    const handlers = {
      start(message: Traced) {
        // Outside a recorded span (tracing off, the event bus, a trace the sampler left out) nothing is built.
        if (!tracing.recording()) return;
        const operation = message.command.toUpperCase();
        const span = tracing.start(operation, {
          kind: 'client',
          requireParent: true,
          attributes: {
            'db.system.name': 'redis',
            'db.operation.name': operation,
            'db.namespace': message.database === undefined ? undefined : String(message.database),
            'server.address': message.serverAddress,
            'server.port': message.serverPort,
          },
        });
        if (span) message[SPAN] = span;
      },
      end() {},
      asyncStart() {},
      asyncEnd(message: Traced) {
        message[SPAN]?.end();
      },
      error(message: Traced) {
        const span = message[SPAN];
        if (!span) return;
        const code = (message.error as { name?: unknown } | undefined)?.name;
        tracing.fail(span, typeof code === 'string' ? code : 'Error');
        span.end();
        delete message[SPAN];
      },
    };
    channel.subscribe(handlers);
    unsubscribe = () => channel.unsubscribe(handlers);
  }
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    if (--users === 0) unsubscribe?.();
  };
}
