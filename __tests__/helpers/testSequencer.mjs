// The order test files start in (jest.config.mjs `testSequencer`). Jest's own order runs the files that took
// longest last time first, so that no long file starts near the end while the other workers sit idle; with no
// timings yet (a fresh clone, a cleared cache) it falls back to file size, which says little here: some short files
// wait for seconds (a sign-in lock to expire, a browser, child processes, a socket's buffers to fill). Those start
// first on such a run, in this order, longest first; the rest keep Jest's order.
import testSequencer from '@jest/test-sequencer';

const Sequencer = testSequencer.default;

const LONG_FIRST = [
  'integration/subscriptions-slow-consumer',
  'integration/signin-throttle',
  'integration/process',
  'unit/contract-check',
  'integration/result-cache',
  'integration/subscriptions-shared',
  'integration/browser-signin',
  'integration/graphiql',
  'integration/readme-examples',
  'integration/auth-callback',
  'integration/graphql-production',
  'integration/event-ids-are-numbers',
];

const rank = (test) => {
  const i = LONG_FIRST.findIndex((name) => test.path.endsWith(`/__tests__/${name}.test.ts`));
  return i < 0 ? LONG_FIRST.length : i;
};

class LongFirstSequencer extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    if (sorted.some((test) => test.duration != null)) return sorted;
    return sorted
      .map((test, i) => ({ test, i }))
      .sort((a, b) => rank(a.test) - rank(b.test) || a.i - b.i)
      .map(({ test }) => test);
  }
}

export default LongFirstSequencer;
