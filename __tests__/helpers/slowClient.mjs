// Slow HTTP clients in a process of their own, so that their timers are not held up by the server under test (a
// test's server runs in the Jest worker): reads `{ port, exchanges: [{ steps: [[delayMs, text], …] }] }` as JSON on
// stdin, runs every exchange at once on a connection of its own, and writes one result per exchange as JSON on
// stdout: the raw answer, when it began after the first and the last byte written, and whether every step was sent.
// Each exchange stops sending once the server answers.
import { Buffer } from 'node:buffer';
import { once } from 'node:events';
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';
import { text } from 'node:stream/consumers';
import { setTimeout as sleep } from 'node:timers/promises';

async function exchange(port, steps) {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const chunks = [];
  let answeredAt;
  let error;
  socket.on('data', (chunk) => {
    answeredAt ??= performance.now();
    chunks.push(chunk);
  });
  socket.on('error', (err) => (error = err.code ?? err.message));
  const closed = once(socket, 'close');
  const firstAt = performance.now();
  let lastAt = firstAt;
  let sentAll = true;
  for (const [delay, part] of steps) {
    if (delay) await sleep(delay);
    if (answeredAt !== undefined || socket.destroyed) {
      sentAll = false;
      break;
    }
    socket.write(part);
    lastAt = performance.now();
  }
  await closed;
  return {
    text: Buffer.concat(chunks).toString('utf8'),
    afterLastByteMs: answeredAt === undefined ? null : answeredAt - lastAt,
    afterFirstByteMs: answeredAt === undefined ? null : answeredAt - firstAt,
    sentAll,
    ...(error ? { error } : {}),
  };
}

const { port, exchanges } = JSON.parse(await text(process.stdin));
process.stdout.write(JSON.stringify(await Promise.all(exchanges.map(({ steps }) => exchange(port, steps)))));
