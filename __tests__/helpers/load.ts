/** What one request of a load run ended with: an HTTP status, or the transport error that replaced it. */
export interface Outcome {
  readonly name: string;
  readonly status: number | 'error';
  readonly error?: string;
  readonly retryAfter?: string | undefined;
  readonly contentType?: string | undefined;
  readonly body?: unknown;
  /** When it was sent, and how long it took (ms). */
  readonly sentAt: number;
  readonly ms: number;
}

export type Send = (n: number) => Promise<Omit<Outcome, 'sentAt' | 'ms'>>;

/**
 * A bounded open-loop load generator: starts request n every 1000/rate ms, whatever the earlier ones
 * are doing, until `stop()` or `maxRequests`. `done()` waits for the stragglers and returns every outcome.
 */
export function startLoad(opts: { rate: number; maxRequests: number; send: Send; paused?: () => boolean }) {
  const outcomes: Outcome[] = [];
  const inFlight = new Set<Promise<void>>();
  let n = 0;
  let stopped = false;
  const fire = () => {
    if (n >= opts.maxRequests) return stop();
    const i = n++;
    const sentAt = Date.now();
    const p = opts
      .send(i)
      .catch((err: unknown) => ({ name: 'unknown', status: 'error' as const, error: String(err) }))
      .then((o) => {
        outcomes.push({ ...o, sentAt, ms: Date.now() - sentAt });
      })
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  };
  // Timers run late on a loaded machine: each tick sends as many requests as came due since the last one, so the
  // rate holds over the run instead of sagging with the timer. Nothing comes due while paused.
  let due = 1;
  let last = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    due += ((now - last) * opts.rate) / 1000;
    last = now;
    if (opts.paused?.()) due = 0;
    for (; due >= 1 && !stopped; due--) fire();
  }, 1000 / opts.rate);
  function stop() {
    stopped = true;
    clearInterval(timer);
  }
  return {
    outcomes,
    sent: () => n,
    stop,
    async done(): Promise<Outcome[]> {
      if (!stopped) stop();
      while (inFlight.size) await Promise.all([...inFlight]);
      return outcomes.sort((a, b) => a.sentAt - b.sentAt);
    },
  };
}

/** Resolves once `check` holds, polling every `everyMs`, or rejects after `tries` attempts. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  { tries = 100, everyMs = 200 } = {},
): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const value = await check().catch(() => undefined);
    if (value) return value;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`gave up waiting for ${what}`);
}
