// The order test files start in (jest.config.mjs `testSequencer`). Jest's own order runs the files that took
// longest last time first, so that no long file starts near the end while the other workers sit idle; with no
// timings yet (a fresh clone, a cleared cache) it falls back to file size, which says little here: some short files
// wait for seconds (a sign-in lock to expire, a browser, child processes, a socket's buffers to fill). On such a run
// the files below start in this order: the longest of a measured run (docs/testing.md#how-long-it-takes) first,
// with the short ones that wait, then the others; a file not listed comes last, in Jest's order.
import testSequencer from '@jest/test-sequencer';

const Sequencer = testSequencer.default;

const LONG_FIRST = [
  'integration/scim',
  'integration/processes',
  'integration/rest',
  'integration/auth',
  'integration/identity-provider',
  'integration/subscriptions-slow-consumer',
  'integration/subscriptions',
  'integration/browser',
  'integration/result-cache',
  'integration/readme-examples',
  'integration/graphql-clients',
  'unit/contract-check',
  'integration/signin-throttle',
  // The rest, longest first, so that the run ends on short files (without them it ended on a 32 s one, Jest's
  // fallback being file size).
  'integration/operations',
  'unit/project',
  'integration/webhooks',
  'integration/graphql-hardening',
  'integration/http-server-bounds',
  'integration/graphql',
  'integration/dpop',
  'integration/graphql-answers-unchanged',
  'unit/domain',
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
