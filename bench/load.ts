import { createHistogram } from 'node:perf_hooks';
import autocannon from 'autocannon';

export interface LoadSpec {
  readonly url: string;
  readonly method: 'GET' | 'POST';
  readonly headers: Record<string, string>;
  readonly body?: string;
  /** Every response must be exactly this body, or it counts as a mismatch. */
  readonly expectBody?: string;
  /**
   * Applied to expectBody and to every response before they are compared, so that a field which legitimately
   * differs from one response to the next is not counted as a mismatch (see ignoreBudgetCountdown).
   */
  readonly normalize?: (body: string) => string;
}

/** Where the app's `extensions.cost` starts: Apollo's result ends with it, after `data`. */
const COST_EXTENSION = ',"extensions":{"cost":{';
const COST_TAIL =
  /^,"extensions":\{"cost":\{"complexity":(\d+),"requested":(\d+),"remaining":\d+,"resetSeconds":\d+\}\}\}$/;

/**
 * The app's `extensions.cost` reports the caller's rate budget: `remaining` falls by the points each request
 * spends, and `resetSeconds` counts down to the end of the window with the clock, so no two answers are byte-equal.
 * Only those two numbers are blanked, and only in a cost extension that closes the body; complexity, requested
 * points and everything in `data` must still match byte for byte.
 */
export function ignoreBudgetCountdown(body: string): string {
  const at = body.lastIndexOf(COST_EXTENSION);
  if (at < 0) return body;
  const tail = COST_TAIL.exec(body.slice(at));
  if (!tail) return body;
  return `${body.slice(0, at)},"extensions":{"cost":{"complexity":${tail[1]},"requested":${tail[2]},"remaining":#,"resetSeconds":#}}}`;
}

export interface LoadStats {
  /** Responses received (any status). */
  readonly responses: number;
  readonly seconds: number;
  readonly rps: number;
  readonly meanMs: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly non2xx: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  readonly timeouts: number;
  /** 2xx responses whose body differed from the expected one. */
  readonly mismatches: number;
  /** A run by amount that hit the time limit (3 × seconds + 10 s) and was stopped. */
  readonly cutShort: boolean;
  readonly statusCodes: Record<string, number>;
}

export interface LoadOptions {
  readonly connections: number;
  /** Run for this long (warm-ups) ... */
  readonly seconds: number;
  /**
   * ... or, for measured runs, send exactly this many requests (about `seconds` worth at the
   * warm-up's rate) and wait for every answer. A run cut off by time abandons the requests in
   * flight, which the server still executes: their SQL would then be counted against too few requests.
   */
  readonly amount?: number;
}

function verifier(expected: string, normalize: (body: string) => string) {
  const wanted = normalize(expected);
  return (body: string | Buffer | undefined) => {
    const text = typeof body === 'string' ? body : (body?.toString('utf8') ?? '');
    return text === expected || normalize(text) === wanted;
  };
}

/**
 * Closed-loop load with autocannon: `connections` keep-alive connections, each sending its next
 * request as soon as the previous response arrives. Latencies are recorded here, from autocannon's
 * per-response hrtime durations, in microseconds: autocannon's own histogram keeps whole
 * milliseconds, too coarse for a floor that answers in one or two.
 */
export function runLoad(spec: LoadSpec, opts: LoadOptions): Promise<LoadStats> {
  const run = recordRun(opts.seconds);
  const { latencies } = run;

  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        method: spec.method,
        headers: spec.headers,
        ...(spec.body !== undefined ? { body: spec.body } : {}),
        ...(spec.expectBody !== undefined
          ? spec.normalize
            ? { verifyBody: verifier(spec.expectBody, spec.normalize) }
            : { expectBody: spec.expectBody }
          : {}),
        connections: opts.amount ? Math.min(opts.connections, opts.amount) : opts.connections,
        pipelining: 1,
        ...(opts.amount ? { amount: opts.amount } : { duration: opts.seconds }),
        timeout: 10,
        // autocannon ends a run at its next sample tick; 100 ms instead of 1 s keeps the idle tail short.
        sampleInt: 100,
      },
      (error, result) => {
        run.finish();
        if (error) return reject(error);
        const { responses, seconds, cutShort } = run;
        const ms = (percentile: number) => latencies.percentile(percentile) / 1000;
        resolve({
          responses,
          seconds,
          rps: seconds > 0 ? responses / seconds : 0,
          meanMs: responses ? latencies.mean / 1000 : 0,
          p50Ms: responses ? ms(50) : 0,
          p90Ms: responses ? ms(90) : 0,
          p99Ms: responses ? ms(99) : 0,
          maxMs: responses ? latencies.max / 1000 : 0,
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          mismatches: result.mismatches,
          cutShort,
          statusCodes: Object.fromEntries(
            Object.entries(result.statusCodeStats ?? {}).map(([code, { count }]) => [code, count ?? 0]),
          ),
        });
      },
    );
    run.watch(instance);
  });
}

/**
 * What every closed-loop run records of itself: its responses, their latencies in microseconds (from autocannon's
 * per-response hrtime; its own histogram keeps whole milliseconds, too coarse for a floor that answers in one or
 * two), the time from the start to the last answer, and a time limit: a server that slows down mid-run must not
 * stretch a run by `amount` without bound.
 */
export function recordRun(seconds: number) {
  const latencies = createHistogram({ lowest: 1, highest: 60_000_000, figures: 3 });
  const started = performance.now();
  let lastResponse = started;
  let limit: NodeJS.Timeout | undefined;
  const run = {
    latencies,
    responses: 0,
    cutShort: false,
    /** From the start to the last answer. */
    get seconds() {
      return (lastResponse - started) / 1000;
    },
    watch(instance: autocannon.Instance) {
      limit = setTimeout(
        () => {
          run.cutShort = true;
          instance.stop();
        },
        (3 * seconds + 10) * 1000,
      );
      instance.on('response', (_client, _status, _bytes, responseTime) => {
        run.responses++;
        lastResponse = performance.now();
        latencies.record(Math.max(1, Math.round(responseTime * 1000)));
      });
    },
    finish() {
      clearTimeout(limit);
    },
  };
  return run;
}
