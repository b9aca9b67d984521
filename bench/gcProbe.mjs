// Loaded by `npm run bench -- --topology` into each replica it starts (`--expose-gc --import`), never by the app
// itself: on SIGUSR2 the replica runs a full garbage collection and logs what it holds after it, as one JSON line on
// stdout beside its own log (the bench reads it there). The soak compares these readings, which do not depend on
// where on the collector's sawtooth a sample falls, as RSS samples between collections do.
import { setTimeout } from 'node:timers';

process.on('SIGUSR2', () => {
  globalThis.gc();
  // A second later, not at once: V8 sweeps and returns freed pages on its own threads after the pause.
  setTimeout(() => {
    const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage();
    const reading = { msg: 'bench gc', rss, heapTotal, heapUsed, external, arrayBuffers };
    process.stdout.write(`${JSON.stringify(reading)}\n`);
  }, 1000);
});
